package plugin

import (
	"testing"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/fleet"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// One rank for a plan: what fails the single-cluster plan is what the
// fleet matrix calls Blocked, and a migration that would wait is Warn in
// both.
func TestAPlanHasOneRank(t *testing.T) {
	blocking := func(hazard string) pgv1.Hazard { return pgv1.Hazard{Type: hazard, Severity: pgv1.SeverityBlocking} }
	stage := func(hs ...pgv1.Hazard) StageReport { return StageReport{Feasible: len(hs) == 0, Hazards: hs} }
	verdict := func(o planning.OutcomeKind) *VerdictReport { return &VerdictReport{Outcome: string(o)} }
	for _, tc := range []struct {
		name string
		r    Report
		want fleet.Level
	}{
		{"every stage feasible, it proceeds", Report{Stages: []StageReport{stage(), stage()}, Verdict: verdict(planning.Proceeds)}, fleet.OK},
		{"a target is missing", Report{Missing: []string{"Deployment/web"}}, fleet.Blocked},
		{"the operator would block the next stage", Report{Stages: []StageReport{stage()}, Verdict: verdict(planning.Blocked)}, fleet.Blocked},
		{"the soft stage proceeds, the hard one would deadlock", Report{
			Stages: []StageReport{stage(), stage(blocking(placement.HazardRolloutDeadlock))}, Verdict: verdict(planning.Proceeds)}, fleet.Blocked},
		{"the hard stage lacks nodes: the operator waits for them", Report{
			Stages: []StageReport{stage(), stage(blocking(placement.HazardInsufficientCapacity))}, Verdict: verdict(planning.Proceeds)}, fleet.Warn},
		{"it waits for capacity now", Report{
			Stages: []StageReport{stage(blocking(placement.HazardInsufficientCapacity))}, Verdict: verdict(planning.WaitingForCapacity)}, fleet.Warn},
		{"it waits for its pods", Report{Stages: []StageReport{stage()}, Verdict: verdict(planning.Waiting)}, fleet.Warn},
		{"a finding for information only", Report{Stages: []StageReport{{Feasible: true, Hazards: []pgv1.Hazard{{Type: placement.HazardNotPredicted, Severity: pgv1.SeverityInfo}}}}}, fleet.OK},
		{"the final stage reached", Report{Reached: pgv1.StageHard}, fleet.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.Level(); got != tc.want {
				t.Errorf("rank %s, want %s", got, tc.want)
			}
			exits := fleet.Fails(tc.r.Level(), fleet.Blocked)
			if exits != (tc.want == fleet.Blocked) {
				t.Errorf("plan exits 1: %v, by default only for Blocked", exits)
			}
		})
	}
}
