package controller

import (
	corev1 "k8s.io/api/core/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// snapshotOf records an entry (a pod spec holding only our term or spread)
// in the API's form; nil for none.
func snapshotOf(entry *corev1.PodSpec) *pgv1.PlacementSnapshot {
	if entry == nil {
		return nil
	}
	snap := &pgv1.PlacementSnapshot{TopologySpreadConstraints: entry.TopologySpreadConstraints}
	if entry.Affinity != nil {
		snap.PodAntiAffinity = entry.Affinity.PodAntiAffinity
	}
	return snap
}

// entryOf is the inverse of snapshotOf.
func entryOf(snap *pgv1.PlacementSnapshot) *corev1.PodSpec {
	if snap == nil {
		return nil
	}
	entry := &corev1.PodSpec{TopologySpreadConstraints: snap.TopologySpreadConstraints}
	if snap.PodAntiAffinity != nil {
		entry.Affinity = &corev1.Affinity{PodAntiAffinity: snap.PodAntiAffinity}
	}
	return entry
}

// beforeOf records what a template carries of the fields the migration
// changes.
func beforeOf(spec *corev1.PodSpec) *pgv1.PlacementSnapshot {
	snap := &pgv1.PlacementSnapshot{TopologySpreadConstraints: spec.TopologySpreadConstraints}
	if spec.Affinity != nil && spec.Affinity.PodAntiAffinity != nil {
		snap.PodAntiAffinity = spec.Affinity.PodAntiAffinity.DeepCopy()
	}
	return snap
}

// truncate keeps a message within the API's bound, on a rune boundary.
func truncate(s string, n int) string { return planning.Truncate(s, n) }
