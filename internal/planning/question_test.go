package planning

import (
	"testing"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// The outcome of a verdict is decided in the operator's order, the same
// for the operator's conditions and plan's "The operator would …".
func TestAVerdictsOutcomeFollowsTheOperatorsOrder(t *testing.T) {
	enough := placement.Capacity{QualifyingNodes: 3, RequiredNodes: 3}
	short := placement.Capacity{QualifyingNodes: 1, RequiredNodes: 2}
	deadlock := placement.Hazard{Type: placement.HazardRolloutDeadlock, Blocking: true, Message: "deadlock"}
	info := placement.Hazard{Type: placement.HazardOnDeleteStrategy, Message: "on delete"}
	drain := DisruptionVerdict{Reason: pgv1.ReasonEvictedPodUnplaceable, Message: "a drain strands a pod"}
	migration := func(policy pgv1.DisruptionPolicy) *pgv1.PlacementMigration {
		return &pgv1.PlacementMigration{Spec: pgv1.PlacementMigrationSpec{Guards: &pgv1.Guards{Disruptions: policy}}}
	}
	cases := []struct {
		name   string
		v      Verdict
		policy pgv1.DisruptionPolicy
		want   Outcome
	}{
		{"a claim comes first", Verdict{Claim: &Claim{Migration: "first"}, Answers: nil}, "",
			Outcome{Kind: Blocked, Reason: pgv1.ReasonTargetClaimed}},
		{"then the capacity, before any hazard", Verdict{Answers: []placement.Answer{{Capacity: short, Hazards: []placement.Hazard{deadlock}}}}, "",
			Outcome{Kind: WaitingForCapacity, Reason: pgv1.ReasonInsufficientCapacity, Message: "1 of 2 qualifying nodes"}},
		{"then a blocking hazard of the final stage", Verdict{Answers: []placement.Answer{{Capacity: enough}, {Capacity: enough, Hazards: []placement.Hazard{info, deadlock}}}}, "",
			Outcome{Kind: Blocked, Reason: placement.HazardRolloutDeadlock, Message: "deadlock"}},
		{"a hazard for information proceeds", Verdict{Answers: []placement.Answer{{Capacity: enough, Hazards: []placement.Hazard{info}}}}, "",
			Outcome{Kind: Proceeds}},
		{"a failed pre-flight blocks when the guards block", Verdict{Answers: []placement.Answer{{Capacity: enough}}, Disruptions: drain, PreflightAsked: true}, pgv1.DisruptionBlock,
			Outcome{Kind: Blocked, Reason: pgv1.ReasonEvictedPodUnplaceable, Message: "a drain strands a pod"}},
		{"and proceeds when they warn", Verdict{Answers: []placement.Answer{{Capacity: enough}}, Disruptions: drain, PreflightAsked: true}, pgv1.DisruptionWarn,
			Outcome{Kind: Proceeds}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.v.Outcome(migration(tc.policy))
			if tc.want.Kind == Blocked && tc.want.Reason == pgv1.ReasonTargetClaimed {
				got.Message = ""
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The pre-flight's finding is worded once for plan and lint: blocking
// under Block, for information under Warn, nothing when it passed or was
// not asked.
func TestThePreflightFindingFollowsTheGuards(t *testing.T) {
	drain := DisruptionVerdict{Reason: pgv1.ReasonDrainBlockedByBudget, Message: "no drain completes"}
	block := &pgv1.PlacementMigration{Spec: pgv1.PlacementMigrationSpec{Guards: &pgv1.Guards{Disruptions: pgv1.DisruptionBlock}}}
	warn := &pgv1.PlacementMigration{}
	if h := (Verdict{Disruptions: drain, PreflightAsked: true}).PreflightHazard(block); h == nil || !h.Blocking || h.Type != pgv1.ReasonDrainBlockedByBudget {
		t.Errorf("under Block: %+v", h)
	}
	if h := (Verdict{Disruptions: drain, PreflightAsked: true}).PreflightHazard(warn); h == nil || h.Blocking {
		t.Errorf("under the default (Warn): %+v", h)
	}
	if h := (Verdict{Disruptions: drain}).PreflightHazard(block); h != nil {
		t.Errorf("not asked, yet found: %+v", h)
	}
	if h := (Verdict{Disruptions: Tolerated, PreflightAsked: true}).PreflightHazard(block); h != nil {
		t.Errorf("tolerated, yet found: %+v", h)
	}
}
