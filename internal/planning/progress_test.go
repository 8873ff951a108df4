package planning

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// The stage asked about next follows the weakest stage verified: the
// next one up, the final stage when the spec lowered it below, nothing
// once the final stage is verified.
func TestTheNextStageFollowsTheWeakestVerified(t *testing.T) {
	for _, tc := range []struct {
		weakest, final, want pgv1.Stage
	}{
		{pgv1.StageNone, pgv1.StageSoft, pgv1.StageSoft},
		{pgv1.StageNone, pgv1.StageHard, pgv1.StageSoft},
		{pgv1.StageSoft, pgv1.StageHard, pgv1.StageHard},
		{pgv1.StageSoft, pgv1.StageSoft, ""},
		{pgv1.StageHard, pgv1.StageHard, ""},
		{pgv1.StageHard, pgv1.StageSoft, pgv1.StageSoft},
	} {
		if got := NextStage(tc.weakest, tc.final); got != tc.want {
			t.Errorf("after %q towards %q: %q, want %q", tc.weakest, tc.final, got, tc.want)
		}
	}
}

// A stage counts as verified on a target only while the entry its status
// records is the one the constraint renders now: a migration whose spec
// changed starts over, in the operator and in plan alike.
func TestAStageIsVerifiedOnlyForTheEntryItRecorded(t *testing.T) {
	_, found := apiCluster(t, corev1.PodSpec{}, 3, 2, 1)
	hostname := ConstraintFromSpec(pgv1.Constraint{PodAntiAffinity: &pgv1.PodAntiAffinityConstraint{TopologyKey: corev1.LabelHostname}})
	Render(found, hostname)
	tgt := found[0]
	soft := tgt.Entry(pgv1.StageSoft)
	record := func(entry *corev1.PodSpec) *pgv1.PlacementMigration {
		pm := &pgv1.PlacementMigration{}
		pm.Status.Targets = []pgv1.TargetStatus{{Kind: tgt.Ref.Kind, Name: tgt.Ref.Name, UID: string(tgt.UID()),
			Applied: SnapshotOf(entry), Verified: &pgv1.StageMilestone{Stage: pgv1.StageSoft}}}
		return pm
	}
	pm := record(soft)
	if got := Weakest(pm, found); got != pgv1.StageSoft {
		t.Fatalf("verified %q, want Soft", got)
	}
	if got := NextStage(Weakest(pm, found), pgv1.StageHard); got != pgv1.StageHard {
		t.Errorf("next %q, want Hard", got)
	}
	if !SameEntry(EntryOf(pm.Status.Targets[0].Applied), soft) {
		t.Error("the recorded entry reads back as another")
	}
	zone := ConstraintFromSpec(pgv1.Constraint{PodAntiAffinity: &pgv1.PodAntiAffinityConstraint{TopologyKey: corev1.LabelTopologyZone}})
	Render(found, zone)
	if got := Weakest(pm, found); got != pgv1.StageNone {
		t.Errorf("after the spec moved to zones: verified %q, want none", got)
	}
	if got := Weakest(&pgv1.PlacementMigration{}, found); got != pgv1.StageNone {
		t.Errorf("with no status: %q", got)
	}
}
