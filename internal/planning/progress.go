package planning

import (
	corev1 "k8s.io/api/core/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// Where a migration stands, read from its status: the stage verified on
// each target, and so the stage the operator asks about next. The
// operator picks its next stage from it; plan reports the decision about
// that very stage, so a migration verified at Soft is planned at Hard.

// Recorded is the status entry of a target, nil when it has none.
func Recorded(pm *pgv1.PlacementMigration, ref pgv1.TargetRef) *pgv1.TargetStatus {
	for i := range pm.Status.Targets {
		if ts := &pm.Status.Targets[i]; ts.Kind == ref.Kind && ts.Name == ref.Name {
			return ts
		}
	}
	return nil
}

// KeepRecordedRenderings keeps, for each target the migration has
// verified a stage on, the rendering it was written with (KeepRecorded).
func KeepRecordedRenderings(pm *pgv1.PlacementMigration, ts []*Target, c placement.Constraint) {
	for _, t := range ts {
		if rec := Recorded(pm, t.Ref); rec != nil && rec.UID == string(t.UID()) && rec.Verified != nil {
			KeepRecorded(t, c, EntryOf(rec.Applied))
		}
	}
}

// VerifiedStage is the stage verified on the target as its status entry
// records it: none when it records none, or when the entry applied is
// not the one the stage renders now (the spec changed since).
func VerifiedStage(rec *pgv1.TargetStatus, t *Target) pgv1.Stage {
	if rec == nil || rec.Verified == nil || rec.Applied == nil {
		return pgv1.StageNone
	}
	stage := rec.Verified.Stage
	if !SameEntry(EntryOf(rec.Applied), t.Entry(stage)) {
		return pgv1.StageNone
	}
	return stage
}

// Weakest is the stage verified on every target.
func Weakest(pm *pgv1.PlacementMigration, ts []*Target) pgv1.Stage {
	weakest := pgv1.StageHard
	for _, t := range ts {
		if v := VerifiedStage(Recorded(pm, t.Ref), t); v.Rank() < weakest.Rank() {
			weakest = v
		}
	}
	return weakest
}

// NextStage is the stage asked about after the weakest verified one: the
// final stage when the spec lowered it below what is verified, the next
// one up otherwise; "" once the final stage is verified.
func NextStage(weakest, final pgv1.Stage) pgv1.Stage {
	switch {
	case weakest.Rank() > final.Rank():
		return final
	case weakest == final:
		return ""
	case weakest == pgv1.StageNone:
		return pgv1.StageSoft
	}
	return pgv1.StageHard
}

// Entry is the target's entry at a stage, nil when the constraint cannot
// render one for it.
func (t *Target) Entry(stage pgv1.Stage) *corev1.PodSpec {
	e, err := t.Rendered.Entry(t.Selector(), stage)
	if err != nil {
		return nil
	}
	return e
}

// SnapshotOf records an entry (a pod spec holding only the migration's
// term or spread) in the API's form; nil for none.
func SnapshotOf(entry *corev1.PodSpec) *pgv1.PlacementSnapshot {
	if entry == nil {
		return nil
	}
	snap := &pgv1.PlacementSnapshot{TopologySpreadConstraints: entry.TopologySpreadConstraints}
	if entry.Affinity != nil {
		snap.PodAntiAffinity = entry.Affinity.PodAntiAffinity
	}
	return snap
}

// EntryOf is the entry a status records (an applied or previous
// placement).
func EntryOf(snap *pgv1.PlacementSnapshot) *corev1.PodSpec {
	if snap == nil {
		return nil
	}
	entry := &corev1.PodSpec{TopologySpreadConstraints: snap.TopologySpreadConstraints}
	if snap.PodAntiAffinity != nil {
		entry.Affinity = &corev1.Affinity{PodAntiAffinity: snap.PodAntiAffinity}
	}
	return entry
}

// SameEntry compares two entries as the API server stores them.
func SameEntry(a, b *corev1.PodSpec) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return placement.Carries(a, b) && placement.Carries(b, a)
}
