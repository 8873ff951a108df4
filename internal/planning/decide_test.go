package planning

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// asked is the one question about a hostname anti-affinity among api's
// own pods, final stage Hard, on apiCluster's nodes and replicas.
func asked(t *testing.T, nodes, replicas int, stage pgv1.Stage, capacity *pgv1.Capacity, guards *pgv1.Guards) (Situation, Verdict) {
	t.Helper()
	snap, found := apiCluster(t, corev1.PodSpec{}, nodes, replicas, 1)
	pm := &pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Namespace: "payments", Name: "api-apart", UID: "pm-1"},
		Spec: pgv1.PlacementMigrationSpec{Targets: []pgv1.TargetRef{{Kind: pgv1.KindDeployment, Name: "api"}},
			Constraint: pgv1.Constraint{PodAntiAffinity: &pgv1.PodAntiAffinityConstraint{TopologyKey: corev1.LabelHostname}},
			Capacity:   capacity, Guards: guards, FinalStage: pgv1.StageHard}}
	Render(found, ConstraintFromSpec(pm.Spec.Constraint))
	sit := Situation{Intent: IntentOf(pm), Targets: found}
	v, err := AskStage(snap, sit, stage)
	if err != nil {
		t.Fatal(err)
	}
	return sit, v
}

// The operator, plan and lint decide in one place, in the operator's
// order: what holds a stage before the engine is asked, the capacity, a
// blocking hazard (a wait when the migration asks an autoscaler for the
// nodes that clear it), the pods, the pre-flight as the guards weigh it,
// the protected pods.
func TestTheDecisionFollowsTheOperatorsOrder(t *testing.T) {
	provision := &pgv1.Capacity{Provision: &pgv1.Provision{Mode: pgv1.ProvisionCapacityBuffer, MaxNodes: ptr.To[int32](1)}}
	drain := DisruptionVerdict{Reason: pgv1.ReasonEvictedPodUnplaceable, Message: "a drain strands a pod"}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T) (Situation, Verdict, Facts)
		kind  OutcomeKind
		// reason and message are the outcome's; message is a part of it.
		reason, message string
		check           func(t *testing.T, d Decision)
	}{
		{"another migration's claim comes first", func(t *testing.T) (Situation, Verdict, Facts) {
			sit, _ := asked(t, 3, 2, pgv1.StageSoft, nil, nil)
			sit.Others = []pgv1.PlacementMigration{claiming("first")}
			return sit, Verdict{Stage: pgv1.StageSoft}, Facts{InFlight: "other", InFlightOn: "Deployment/api"}
		}, Blocked, pgv1.ReasonTargetClaimed, "PlacementMigration first", nil},
		{"too many targets come before anything", func(t *testing.T) (Situation, Verdict, Facts) {
			sit, _ := asked(t, 3, 2, pgv1.StageSoft, nil, nil)
			sit.Others = []pgv1.PlacementMigration{claiming("first")}
			return sit, Verdict{Stage: pgv1.StageSoft}, Facts{Selected: MaxTargets + 1}
		}, Blocked, pgv1.ReasonTooManyTargets, "selects 51 workloads; a migration records at most 50", nil},
		{"a cause outside the migration stops it after a pause, without an answer", func(t *testing.T) (Situation, Verdict, Facts) {
			sit, _ := asked(t, 3, 2, pgv1.StageSoft, nil, nil)
			return sit, Verdict{Stage: pgv1.StageSoft}, Facts{Selected: MaxTargets, Outside: &Stop{Reason: pgv1.ReasonTargetRolloutFailed, Message: "its own rollout gave up", Blocked: true},
				PodView: &Stop{Reason: pgv1.ReasonWaitingForPodView, Message: "Waiting for the pods of Deployment/api"}}
		}, Blocked, pgv1.ReasonTargetRolloutFailed, "its own rollout gave up", nil},
		{"even with an answer", func(t *testing.T) (Situation, Verdict, Facts) {
			sit, v := asked(t, 3, 2, pgv1.StageSoft, nil, nil)
			return sit, v, Facts{Outside: &Stop{Reason: pgv1.ReasonTargetPodsPending, Message: "pod api-1-0 has been Pending", Blocked: true}}
		}, Blocked, pgv1.ReasonTargetPodsPending, "pod api-1-0 has been Pending", nil},
		{"then a view without the targets' pods waits", func(t *testing.T) (Situation, Verdict, Facts) {
			sit, v := asked(t, 3, 2, pgv1.StageSoft, nil, nil)
			return sit, v, Facts{PodView: &Stop{Reason: pgv1.ReasonWaitingForPodView, Message: "Waiting for the pods of Deployment/api"}}
		}, Waiting, pgv1.ReasonWaitingForPodView, "Waiting for the pods of Deployment/api", nil},
		{"a stage that only lowers the constraint is not held by them", func(t *testing.T) (Situation, Verdict, Facts) {
			sit, _ := asked(t, 3, 2, pgv1.StageSoft, nil, nil)
			return sit, Verdict{Stage: pgv1.StageSoft}, Facts{Lowers: true, Outside: &Stop{Reason: pgv1.ReasonTargetPodsPending, Message: "Pending", Blocked: true},
				PodView: &Stop{Reason: pgv1.ReasonWaitingForPodView, Message: "Waiting"}}
		}, Proceeds, "", "", nil},
		{"a write in flight holds the stage without an answer", func(t *testing.T) (Situation, Verdict, Facts) {
			sit, _ := asked(t, 3, 2, pgv1.StageSoft, nil, nil)
			return sit, Verdict{Stage: pgv1.StageSoft}, Facts{InFlight: "other", InFlightOn: "Deployment/api", Paused: []string{"Deployment/api"}}
		}, Waiting, pgv1.ReasonWaitingForMigration, "PlacementMigration other, which has a write in flight on Deployment/api", nil},
		{"so does a pause", func(t *testing.T) (Situation, Verdict, Facts) {
			sit, _ := asked(t, 3, 2, pgv1.StageSoft, nil, nil)
			return sit, Verdict{Stage: pgv1.StageSoft}, Facts{Paused: []string{"Deployment/api"}}
		}, Waiting, pgv1.ReasonTargetPaused, "Deployment/api is paused (spec.paused): the Soft stage is not written", nil},
		{"then the capacity, before any hazard and the pods", func(t *testing.T) (Situation, Verdict, Facts) {
			sit, v := asked(t, 2, 2, pgv1.StageSoft, &pgv1.Capacity{MinNodes: ptr.To[int32](3)}, nil)
			return sit, v, Facts{Unstable: "Waiting for stable target pods: api-1-0 is not Ready"}
		}, WaitingForCapacity, pgv1.ReasonInsufficientCapacity, "2 of 3 qualifying nodes; waiting for them before the Soft stage, nothing has been changed",
			func(t *testing.T, d Decision) {
				if d.Capacity == nil || d.Capacity.Status != metav1.ConditionFalse || d.Feasible != nil || d.Plan != nil {
					t.Errorf("capacity %+v, feasible %+v, plan %v: only the capacity is judged", d.Capacity, d.Feasible, d.Plan)
				}
			}},
		{"before the Hard stage the Soft stage stays", func(t *testing.T) (Situation, Verdict, Facts) {
			sit, v := asked(t, 2, 2, pgv1.StageHard, &pgv1.Capacity{MinNodes: ptr.To[int32](3)}, nil)
			return sit, v, Facts{}
		}, WaitingForCapacity, pgv1.ReasonInsufficientCapacity, "2 of 3 qualifying nodes; the Soft stage stays applied until they exist", nil},
		{"then a blocking hazard of the final stage", func(t *testing.T) (Situation, Verdict, Facts) {
			sit, v := asked(t, 2, 2, pgv1.StageSoft, nil, nil)
			return sit, v, Facts{Unstable: "Waiting for stable target pods: api-1-0 is not Ready"}
		}, Blocked, placement.HazardRolloutDeadlock, "", func(t *testing.T, d Decision) {
			if d.Feasible == nil || d.Feasible.Status != metav1.ConditionFalse || d.Feasible.Reason != placement.HazardRolloutDeadlock {
				t.Errorf("feasible %+v", d.Feasible)
			}
			if d.Capacity == nil || d.Capacity.Message != "2 qualifying nodes (2 needed) in 2 domains (2 needed)" {
				t.Errorf("capacity %+v", d.Capacity)
			}
		}},
		{"which is a wait for capacity when the migration asks an autoscaler for the nodes that clear it", func(t *testing.T) (Situation, Verdict, Facts) {
			sit, v := asked(t, 2, 2, pgv1.StageSoft, provision, nil)
			if v.Request == nil || v.Request.Shortfall != 1 {
				t.Fatalf("the request is sized inside the question: %+v", v.Request)
			}
			return sit, v, Facts{}
		}, WaitingForCapacity, pgv1.ReasonInsufficientCapacity, "deadlock", func(t *testing.T, d Decision) {
			if d.Capacity == nil || d.Capacity.Status != metav1.ConditionFalse || !strings.Contains(d.Capacity.Message, d.Blocking.Message) {
				t.Errorf("capacity %+v", d.Capacity)
			}
		}},
		{"then the pods", func(t *testing.T) (Situation, Verdict, Facts) {
			sit, v := asked(t, 3, 2, pgv1.StageSoft, nil, nil)
			return sit, v, Facts{Unstable: "Waiting for stable target pods: api-1-0 is not Ready", Protected: map[string]bool{"api-1-0": true}}
		}, Waiting, pgv1.ReasonWaitingForPods, "api-1-0 is not Ready", func(t *testing.T, d Decision) {
			if d.Feasible == nil || d.Feasible.Status != metav1.ConditionTrue || d.Feasible.Message != "The simulated rollout of the Soft and Hard stage completes on every target" {
				t.Errorf("feasible %+v", d.Feasible)
			}
		}},
		{"then a failed pre-flight, when the guards block on it", func(t *testing.T) (Situation, Verdict, Facts) {
			sit, v := asked(t, 3, 2, pgv1.StageHard, nil, &pgv1.Guards{Disruptions: pgv1.DisruptionBlock})
			v.Disruptions, v.PreflightAsked = drain, true
			return sit, v, Facts{Protected: map[string]bool{"api-1-0": true}}
		}, Blocked, pgv1.ReasonEvictedPodUnplaceable, "a drain strands a pod" + PreflightBlocks, nil},
		{"a warning, when they warn", func(t *testing.T) (Situation, Verdict, Facts) {
			sit, v := asked(t, 3, 2, pgv1.StageHard, nil, nil)
			v.Disruptions, v.PreflightAsked = drain, true
			return sit, v, Facts{}
		}, Proceeds, "", "", func(t *testing.T, d Decision) {
			if d.Warning == nil || d.Warning.Message != "a drain strands a pod"+PreflightWarns {
				t.Errorf("warning %+v", d.Warning)
			}
		}},
		{"then the protected pods the stage recreates", func(t *testing.T) (Situation, Verdict, Facts) {
			sit, v := asked(t, 3, 2, pgv1.StageSoft, nil, nil)
			return sit, v, Facts{Protected: map[string]bool{"api-1-1": true, "other": true}}
		}, Blocked, pgv1.ReasonProtectedPodChanged, "The Soft stage would recreate protected pod(s) api-1-1 (of Deployment/api)", func(t *testing.T, d Decision) {
			if len(d.Plan) != 1 || d.Plan[0].RecreatesCount != 2 {
				t.Errorf("the plan is recorded with the block: %+v", d.Plan)
			}
		}},
		{"a stage that only lowers the constraint is judged on its protected pods alone", func(t *testing.T) (Situation, Verdict, Facts) {
			sit, _ := asked(t, 1, 2, pgv1.StageSoft, nil, nil)
			return sit, Verdict{Stage: pgv1.StageSoft}, Facts{Lowers: true, Unstable: "not Ready"}
		}, Proceeds, "", "", func(t *testing.T, d Decision) {
			if d.Capacity != nil || d.Feasible != nil || len(d.Plan) != 1 {
				t.Errorf("capacity %+v, feasible %+v, plan %+v", d.Capacity, d.Feasible, d.Plan)
			}
		}},
		{"otherwise it proceeds, with its plan", func(t *testing.T) (Situation, Verdict, Facts) {
			sit, v := asked(t, 3, 2, pgv1.StageSoft, nil, nil)
			return sit, v, Facts{Protected: map[string]bool{"other": true}}
		}, Proceeds, "", "", func(t *testing.T, d Decision) {
			if len(d.Plan) != 1 || d.Plan[0].RecreatesCount != 2 || d.Warning != nil {
				t.Errorf("plan %+v, warning %+v", d.Plan, d.Warning)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sit, v, f := tc.setup(t)
			q := &question{v: v}
			d, err := Decide(sit, v.Stage, f, q)
			if err != nil {
				t.Fatal(err)
			}
			if q.stages > 0 && len(v.Answers) == 0 {
				t.Fatalf("the engine was asked, though a fact holds the stage")
			}
			if d.Kind != tc.kind || d.Reason != tc.reason || !strings.Contains(d.Message, tc.message) {
				t.Fatalf("decided %s/%s %q, want %s/%s containing %q", d.Kind, d.Reason, d.Message, tc.kind, tc.reason, tc.message)
			}
			if tc.check != nil {
				tc.check(t, d)
			}
		})
	}
}

// question is a Question answered with v, which counts what it was asked.
type question struct {
	v                      Verdict
	stageErr, preflightErr error
	stages, preflights     int
}

func (q *question) Stage(pgv1.Stage) (Verdict, error) { q.stages++; return q.v, q.stageErr }

func (q *question) Preflight(v *Verdict) error {
	q.preflights++
	v.Disruptions, v.PreflightAsked = DisruptionVerdict{Reason: pgv1.ReasonEvictedPodUnplaceable, Message: "a drain strands a pod"}, true
	return q.preflightErr
}

// claiming is another anti-affinity migration that has written
// Deployment api: it holds the field.
func claiming(name string) pgv1.PlacementMigration {
	return pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Namespace: "payments", Name: name},
		Spec: pgv1.PlacementMigrationSpec{Targets: []pgv1.TargetRef{{Kind: pgv1.KindDeployment, Name: "api"}},
			Constraint: pgv1.Constraint{PodAntiAffinity: &pgv1.PodAntiAffinityConstraint{TopologyKey: corev1.LabelHostname}}},
		Status: pgv1.PlacementMigrationStatus{Targets: []pgv1.TargetStatus{{Kind: pgv1.KindDeployment, Name: "api", Stage: pgv1.StageSoft}}}}
}

// A decision asks the engine only once no fact holds the stage, and the
// pre-flight only once it is due and the pods are stable: the pre-flight
// costs many simulated rollouts, and a migration waiting for its pods is
// looked at on every pod change.
func TestADecisionAsksTheEngineOnlyWhenItMust(t *testing.T) {
	block := &pgv1.Guards{Disruptions: pgv1.DisruptionBlock}
	for _, tc := range []struct {
		name               string
		stage              pgv1.Stage
		guards             *pgv1.Guards
		facts              Facts
		stages, preflights int
		reason             string
	}{
		{"a pause asks nothing", pgv1.StageHard, block, Facts{Paused: []string{"Deployment/api"}}, 0, 0, pgv1.ReasonTargetPaused},
		{"nor does a stage that lowers the constraint", pgv1.StageSoft, block, Facts{Lowers: true}, 0, 0, ""},
		{"the Soft stage asks no pre-flight", pgv1.StageSoft, block, Facts{}, 1, 0, ""},
		{"unstable pods hold the pre-flight", pgv1.StageHard, block, Facts{Unstable: "api-1-0 is not Ready"}, 1, 0, pgv1.ReasonWaitingForPods},
		{"under Ignore it is not asked", pgv1.StageHard, &pgv1.Guards{Disruptions: pgv1.DisruptionIgnore}, Facts{}, 1, 0, ""},
		{"otherwise it is asked once, and weighed", pgv1.StageHard, block, Facts{}, 1, 1, pgv1.ReasonEvictedPodUnplaceable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sit, v := asked(t, 3, 2, tc.stage, nil, tc.guards)
			q := &question{v: v}
			d, err := Decide(sit, tc.stage, tc.facts, q)
			if err != nil {
				t.Fatal(err)
			}
			if q.stages != tc.stages || q.preflights != tc.preflights || d.Reason != tc.reason {
				t.Fatalf("asked the stage %d and the pre-flight %d time(s), decided %q; want %d, %d, %q", q.stages, q.preflights, d.Reason, tc.stages, tc.preflights, tc.reason)
			}
			if tc.preflights > 0 && !d.Verdict.PreflightAsked {
				t.Errorf("the decision does not carry the pre-flight it asked")
			}
		})
	}
	t.Run("an answer already holding the pre-flight is not asked again", func(t *testing.T) {
		sit, v := asked(t, 3, 2, pgv1.StageHard, nil, block)
		v.Disruptions, v.PreflightAsked = Tolerated, true
		q := &question{v: v}
		if d, err := Decide(sit, pgv1.StageHard, Facts{}, q); err != nil || q.preflights != 0 || d.Kind != Proceeds {
			t.Fatalf("asked the pre-flight %d time(s), decided %s (%v)", q.preflights, d.Kind, err)
		}
	})
	t.Run("the engine's errors are the decision's", func(t *testing.T) {
		sit, v := asked(t, 3, 2, pgv1.StageHard, nil, block)
		failed := errors.New("the snapshot is gone")
		for _, q := range []*question{{v: v, stageErr: failed}, {v: v, preflightErr: failed}} {
			if _, err := Decide(sit, pgv1.StageHard, Facts{}, q); !errors.Is(err, failed) {
				t.Errorf("decided with error %v, want %v", err, failed)
			}
		}
	})
}

// Plan and lint observe the facts the operator observes: the other
// migrations' writes in flight, paused targets, the pods at a moment, the
// protected pods.
func TestPlanObservesTheOperatorsFacts(t *testing.T) {
	sit, _ := asked(t, 3, 2, pgv1.StageSoft, nil, nil)
	other := pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Name: "other"},
		Status: pgv1.PlacementMigrationStatus{Operation: &pgv1.Operation{Targets: []pgv1.OperationTarget{{Kind: pgv1.KindDeployment, Name: "api"}}}}}
	sit.Others = []pgv1.PlacementMigration{other}
	f := Observe(sit, []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "api-1-0"}}}, time.Now())
	if f.InFlight != "other" || f.InFlightOn != "Deployment/api" {
		t.Errorf("in flight: %q on %q", f.InFlight, f.InFlightOn)
	}
	if !f.Protected["api-1-0"] || len(f.Paused) != 0 {
		t.Errorf("protected %v, paused %v", f.Protected, f.Paused)
	}
	if !strings.Contains(f.Unstable, "api-1-0 is not Ready") {
		t.Errorf("apiCluster's pods carry no Ready condition: %q", f.Unstable)
	}
}

// The pre-flight's finding is worded once, by Decide, for the operator,
// plan, lint and the admission check: blocking under Block, for
// information under Warn, said of the change for a change written straight
// into a workload, nothing when it passed or was not asked.
func TestThePreflightFindingFollowsTheGuards(t *testing.T) {
	drain := DisruptionVerdict{Reason: pgv1.ReasonDrainBlockedByBudget, Message: afterHard + "no drain completes", Fix: "relax the budget"}
	preflight := func(guards *pgv1.Guards, dv DisruptionVerdict, wasAsked, change bool) *placement.Hazard {
		sit, v := asked(t, 3, 2, pgv1.StageHard, nil, guards)
		sit.Change = change
		v.Disruptions, v.PreflightAsked = dv, wasAsked
		return PreflightOf(sit, v)
	}
	block := &pgv1.Guards{Disruptions: pgv1.DisruptionBlock}
	if h := preflight(block, drain, true, false); h == nil || !h.Blocking || h.Message != drain.Message+PreflightBlocks || h.Fix != drain.Fix {
		t.Errorf("under Block: %+v", h)
	}
	if h := preflight(nil, drain, true, false); h == nil || h.Blocking || h.Message != drain.Message+PreflightWarns {
		t.Errorf("under the default (Warn): %+v", h)
	}
	if h := preflight(block, drain, true, true); h == nil || h.Blocking || h.Message != "once the change has rolled out, no drain completes" {
		t.Errorf("of a change: %+v", h)
	}
	if h := preflight(block, drain, false, false); h != nil {
		t.Errorf("not asked, yet found: %+v", h)
	}
	if h := preflight(block, Tolerated, true, false); h != nil {
		t.Errorf("tolerated, yet found: %+v", h)
	}
}
