package controller

import (
	corev1 "k8s.io/api/core/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// beforeOf records what a template carries of the fields the migration
// changes.
func beforeOf(spec *corev1.PodSpec) *pgv1.PlacementSnapshot {
	snap := &pgv1.PlacementSnapshot{TopologySpreadConstraints: spec.TopologySpreadConstraints}
	if spec.Affinity != nil && spec.Affinity.PodAntiAffinity != nil {
		snap.PodAntiAffinity = spec.Affinity.PodAntiAffinity.DeepCopy()
	}
	return snap
}
