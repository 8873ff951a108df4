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

func TestSummaryIsReadByKstatus(t *testing.T) {
	cases := []struct {
		phase pgv1.Phase
		want  status.Status
		ready metav1.ConditionStatus
	}{
		{pgv1.PhasePending, status.InProgressStatus, metav1.ConditionFalse},
		{pgv1.PhaseWaitingForCapacity, status.InProgressStatus, metav1.ConditionFalse},
		{pgv1.PhaseApplyingSoft, status.InProgressStatus, metav1.ConditionFalse},
		{pgv1.PhaseSoaking, status.InProgressStatus, metav1.ConditionFalse},
		{pgv1.PhaseApplyingHard, status.InProgressStatus, metav1.ConditionFalse},
		{pgv1.PhaseVerifying, status.InProgressStatus, metav1.ConditionFalse},
		{pgv1.PhaseRollingBack, status.InProgressStatus, metav1.ConditionFalse},
		{pgv1.PhasePaused, status.InProgressStatus, metav1.ConditionFalse},
		{pgv1.PhaseBlocked, status.FailedStatus, metav1.ConditionFalse},
		{pgv1.PhaseRolledBack, status.FailedStatus, metav1.ConditionFalse},
		{pgv1.PhaseFailed, status.FailedStatus, metav1.ConditionFalse},
		{pgv1.PhaseDegraded, status.FailedStatus, metav1.ConditionFalse},
		{pgv1.PhaseSucceeded, status.CurrentStatus, metav1.ConditionTrue},
		{pgv1.PhasePlanned, status.CurrentStatus, metav1.ConditionTrue},
	}
	for _, tc := range cases {
		t.Run(string(tc.phase), func(t *testing.T) {
			pm := &pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns", Generation: 3}}
			// Walk through a working phase first, so that leftover
			// conditions of an earlier phase are part of what is tested.
			summarize(pm, outcome{phase: pgv1.PhaseApplyingSoft, reason: pgv1.ReasonProgressing, message: "applying"}, time.Now())
			summarize(pm, outcome{phase: pgv1.PhaseBlocked, reason: pgv1.ReasonHazardFound, message: "blocked"}, time.Now())
			summarize(pm, outcome{phase: tc.phase, reason: "Because", message: "what to do"}, time.Now())

			if got := kstatusOf(t, pm); got != tc.want {
				t.Fatalf("kstatus = %s, want %s", got, tc.want)
			}
			if pm.Status.ObservedGeneration != 3 || pm.Status.Phase != tc.phase {
				t.Fatalf("status = %+v", pm.Status)
			}
			ready := meta.FindStatusCondition(pm.Status.Conditions, pgv1.ConditionReady)
			if ready == nil || ready.Status != tc.ready || ready.ObservedGeneration != 3 {
				t.Fatalf("Ready = %+v", ready)
			}
			reconciling := meta.IsStatusConditionTrue(pm.Status.Conditions, pgv1.ConditionReconciling)
			stalled := meta.IsStatusConditionTrue(pm.Status.Conditions, pgv1.ConditionStalled)
			if reconciling && stalled {
				t.Fatal("Reconciling and Stalled are never true together")
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
	for _, phase := range []pgv1.Phase{pgv1.PhaseSucceeded, pgv1.PhaseDegraded} {
		summarize(pm, outcome{phase: phase, reason: "Because"}, time.Now())
		if meta.FindStatusCondition(pm.Status.Conditions, pgv1.ConditionDisruptionReady) == nil {
			t.Fatalf("%s dropped DisruptionReady", phase)
		}
	}
	summarize(pm, outcome{phase: pgv1.PhaseApplyingSoft, reason: pgv1.ReasonStageApplied}, time.Now())
	if c := meta.FindStatusCondition(pm.Status.Conditions, pgv1.ConditionDisruptionReady); c != nil {
		t.Fatalf("ApplyingSoft kept %+v", c)
	}
}

func TestAnOutdatedStatusIsInProgress(t *testing.T) {
	pm := &pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns", Generation: 1}}
	summarize(pm, outcome{phase: pgv1.PhaseSucceeded, reason: pgv1.ReasonSucceeded, message: "done"}, time.Now())
	pm.Generation = 2 // the spec changed and has not been reconciled yet
	if got := kstatusOf(t, pm); got != status.InProgressStatus {
		t.Fatalf("kstatus = %s, want InProgress until observedGeneration catches up", got)
	}
}
