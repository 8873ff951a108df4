package controller

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// kstatusOf computes the verdict Flux, Helm 4's watcher and kubectl's
// tooling reach for the object, with their own library.
func kstatusOf(t *testing.T, pm *pgv1.PlacementMigration) status.Status {
	t.Helper()
	pm.APIVersion, pm.Kind = pgv1.GroupVersion.String(), "PlacementMigration"
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pm)
	if err != nil {
		t.Fatal(err)
	}
	res, err := status.Compute(&unstructured.Unstructured{Object: obj})
	if err != nil {
		t.Fatal(err)
	}
	return res.Status
}

// What is recorded, and the step's verdict, decide the phase and the
// kstatus conditions; the table goes from milestones to conditions.
func TestPhaseAndConditionsAreDerivedFromMilestones(t *testing.T) {
	op := func(action pgv1.OperationAction, stage pgv1.Stage) func(*pgv1.PlacementMigration) {
		return func(pm *pgv1.PlacementMigration) {
			pm.Status.Operation = &pgv1.Operation{Action: action, Stage: stage}
		}
	}
	halted := func(how pgv1.HaltOutcome) func(*pgv1.PlacementMigration) {
		return func(pm *pgv1.PlacementMigration) {
			pm.Status.Halt = &pgv1.Halt{Outcome: how, Reason: pgv1.ReasonStageTimedOut, Generation: pm.Generation}
		}
	}
	condition := func(t string, s metav1.ConditionStatus, reason string) func(*pgv1.PlacementMigration) {
		return func(pm *pgv1.PlacementMigration) {
			setCondition(pm, time.Now(), t, s, reason, "")
		}
	}
	paused := func(pm *pgv1.PlacementMigration) { pm.Spec.Paused = true }
	dryRun := func(pm *pgv1.PlacementMigration) { pm.Spec.DryRun = true }
	cases := []struct {
		name     string
		recorded []func(*pgv1.PlacementMigration)
		o        outcome
		verified pgv1.Stage
		phase    pgv1.Phase
		kstatus  status.Status
	}{
		{"nothing verified, nothing in flight", nil, outcome{}, pgv1.StageNone, pgv1.PhasePending, status.InProgressStatus},
		{"capacity missing", []func(*pgv1.PlacementMigration){condition(pgv1.ConditionCapacityAvailable, metav1.ConditionFalse, pgv1.ReasonInsufficientCapacity)},
			outcome{}, pgv1.StageNone, pgv1.PhaseWaitingForCapacity, status.InProgressStatus},
		{"the soft stage recorded", []func(*pgv1.PlacementMigration){op(pgv1.ActionApplyStage, pgv1.StageSoft)}, outcome{}, pgv1.StageNone, pgv1.PhaseApplyingSoft, status.InProgressStatus},
		{"the hard stage rolled out, its placement not holding yet", []func(*pgv1.PlacementMigration){op(pgv1.ActionApplyStage, pgv1.StageHard)},
			outcome{settling: true}, pgv1.StageSoft, pgv1.PhaseVerifying, status.InProgressStatus},
		{"soft verified, soaking", nil, outcome{}, pgv1.StageSoft, pgv1.PhaseSoaking, status.InProgressStatus},
		{"soft verified, soaking with the hard stage held", []func(*pgv1.PlacementMigration){op(pgv1.ActionApplyStage, pgv1.StageHard), func(pm *pgv1.PlacementMigration) {
			pm.Status.Operation.NotBefore = &metav1.Time{Time: time.Now().Add(time.Hour)}
		}}, outcome{}, pgv1.StageSoft, pgv1.PhaseSoaking, status.InProgressStatus},
		{"hard verified, success judged next", nil, outcome{}, pgv1.StageHard, pgv1.PhaseVerifying, status.InProgressStatus},
		{"a rollback rolling out", []func(*pgv1.PlacementMigration){op(pgv1.ActionRollBack, pgv1.StageNone)}, outcome{}, pgv1.StageNone, pgv1.PhaseRollingBack, status.InProgressStatus},
		{"a rollback that cannot finish", []func(*pgv1.PlacementMigration){op(pgv1.ActionRollBack, pgv1.StageNone)}, outcome{stalled: true}, pgv1.StageNone, pgv1.PhaseRollingBack, status.FailedStatus},
		{"a lost record being verified", []func(*pgv1.PlacementMigration){op(pgv1.ActionVerify, pgv1.StageSoft)}, outcome{}, pgv1.StageNone, pgv1.PhaseVerifying, status.InProgressStatus},
		{"a revert in flight", []func(*pgv1.PlacementMigration){op(pgv1.ActionRevert, pgv1.StageNone)}, outcome{}, pgv1.StageHard, pgv1.PhasePending, status.InProgressStatus},
		{"drift found, waiting out the backoff", []func(*pgv1.PlacementMigration){condition(pgv1.ConditionConstraintInSync, metav1.ConditionFalse, pgv1.ReasonDrifted)},
			outcome{}, pgv1.StageHard, pgv1.PhaseApplyingHard, status.InProgressStatus},
		{"blocked before writing", nil, outcome{blocked: true}, pgv1.StageNone, pgv1.PhaseBlocked, status.FailedStatus},
		{"blocked outranks an operation", []func(*pgv1.PlacementMigration){op(pgv1.ActionRollBack, pgv1.StageNone)}, outcome{blocked: true}, pgv1.StageSoft, pgv1.PhaseBlocked, status.FailedStatus},
		{"rolled back", []func(*pgv1.PlacementMigration){halted(pgv1.HaltRolledBack)}, outcome{}, pgv1.StageNone, pgv1.PhaseRolledBack, status.FailedStatus},
		{"failed", []func(*pgv1.PlacementMigration){halted(pgv1.HaltFailed)}, outcome{}, pgv1.StageHard, pgv1.PhaseFailed, status.FailedStatus},
		{"a halt of an earlier generation", []func(*pgv1.PlacementMigration){halted(pgv1.HaltRolledBack), func(pm *pgv1.PlacementMigration) { pm.Generation++ }},
			outcome{}, pgv1.StageNone, pgv1.PhasePending, status.InProgressStatus},
		{"paused, whatever is in flight", []func(*pgv1.PlacementMigration){paused, op(pgv1.ActionApplyStage, pgv1.StageHard)}, outcome{}, pgv1.StageSoft, pgv1.PhasePaused, status.InProgressStatus},
		{"succeeded", nil, outcome{done: true}, pgv1.StageHard, pgv1.PhaseSucceeded, status.CurrentStatus},
		{"planned", []func(*pgv1.PlacementMigration){dryRun}, outcome{done: true}, pgv1.StageNone, pgv1.PhasePlanned, status.CurrentStatus},
		{"degraded", nil, outcome{degraded: true}, pgv1.StageHard, pgv1.PhaseDegraded, status.FailedStatus},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pm := &pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns", Generation: 3}}
			// Walk through other verdicts first, so that leftover conditions
			// of an earlier reconcile are part of what is tested.
			for _, earlier := range []outcome{{reason: pgv1.ReasonProgressing}, {blocked: true, reason: pgv1.ReasonHazardFound}, {done: true, reason: pgv1.ReasonSucceeded}} {
				phase, h := derive(pm, earlier, pgv1.StageNone)
				summarize(pm, earlier, phase, h, time.Now())
			}
			for _, r := range tc.recorded {
				r(pm)
			}
			tc.o.reason, tc.o.message = "Because", "what to do"
			phase, h := derive(pm, tc.o, tc.verified)
			summarize(pm, tc.o, phase, h, time.Now())

			if phase != tc.phase || pm.Status.Phase != tc.phase {
				t.Fatalf("phase %s, want %s", phase, tc.phase)
			}
			if got := kstatusOf(t, pm); got != tc.kstatus {
				t.Fatalf("kstatus = %s, want %s", got, tc.kstatus)
			}
			if pm.Status.ObservedGeneration != pm.Generation {
				t.Fatalf("observedGeneration %d of generation %d", pm.Status.ObservedGeneration, pm.Generation)
			}
			ready := meta.FindStatusCondition(pm.Status.Conditions, pgv1.ConditionReady)
			if ready == nil || (ready.Status == metav1.ConditionTrue) != (tc.kstatus == status.CurrentStatus) || ready.Reason != "Because" {
				t.Fatalf("Ready = %+v", ready)
			}
			reconciling := meta.IsStatusConditionTrue(pm.Status.Conditions, pgv1.ConditionReconciling)
			stalled := meta.IsStatusConditionTrue(pm.Status.Conditions, pgv1.ConditionStalled)
			if reconciling && stalled {
				t.Fatal("Reconciling and Stalled are never true together")
			}
			if stalled != (tc.kstatus == status.FailedStatus) || reconciling != (tc.kstatus == status.InProgressStatus) {
				t.Fatalf("Reconciling %v, Stalled %v for %s", reconciling, stalled, tc.kstatus)
			}
			for _, c := range pm.Status.Conditions {
				if (c.Type == pgv1.ConditionReconciling || c.Type == pgv1.ConditionStalled) && c.Status != metav1.ConditionTrue {
					t.Fatalf("%s is present only while true, found %s", c.Type, c.Status)
				}
			}
		})
	}
}

// DisruptionReady speaks of a migration that has succeeded; a migration
// that starts over (a spec change, a retry, a pause) drops it until it
// succeeds again.
func TestDisruptionReadyOnlyAfterSuccess(t *testing.T) {
	pm := &pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns", Generation: 1}}
	setCondition(pm, time.Now(), pgv1.ConditionDisruptionReady, metav1.ConditionFalse, pgv1.ReasonEvictedPodUnplaceable, "a drain strands a pod")
	for _, o := range []outcome{{done: true, reason: "Because"}, {degraded: true, reason: "Because"}} {
		phase, h := derive(pm, o, pgv1.StageHard)
		summarize(pm, o, phase, h, time.Now())
		if meta.FindStatusCondition(pm.Status.Conditions, pgv1.ConditionDisruptionReady) == nil {
			t.Fatalf("%s dropped DisruptionReady", phase)
		}
	}
	pm.Status.Operation = &pgv1.Operation{Action: pgv1.ActionApplyStage, Stage: pgv1.StageSoft}
	o := outcome{reason: pgv1.ReasonStageApplied}
	phase, h := derive(pm, o, pgv1.StageNone)
	summarize(pm, o, phase, h, time.Now())
	if c := meta.FindStatusCondition(pm.Status.Conditions, pgv1.ConditionDisruptionReady); c != nil {
		t.Fatalf("%s kept %+v", phase, c)
	}
}

func TestAnOutdatedStatusIsInProgress(t *testing.T) {
	pm := &pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns", Generation: 1}}
	o := outcome{done: true, reason: pgv1.ReasonSucceeded, message: "done"}
	phase, h := derive(pm, o, pgv1.StageHard)
	summarize(pm, o, phase, h, time.Now())
	pm.Generation = 2 // the spec changed and has not been reconciled yet
	if got := kstatusOf(t, pm); got != status.InProgressStatus {
		t.Fatalf("kstatus = %s, want InProgress until observedGeneration catches up", got)
	}
}
