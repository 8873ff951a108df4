package health

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// Flux's healthChecks, kubectl wait and Helm's watcher judge a resource with
// kstatus: InProgress keeps them waiting, Current lets a dependsOn proceed,
// Failed fails the Kustomization at once instead of at its timeout.
func TestKstatusVerdictOfEveryPhase(t *testing.T) {
	for _, tc := range []struct {
		phase    pgv1.Phase
		observed int64
		want     status.Status
	}{
		{pgv1.PhasePending, 2, status.InProgressStatus},
		{pgv1.PhaseWaitingForCapacity, 2, status.InProgressStatus},
		{pgv1.PhaseApplyingSoft, 2, status.InProgressStatus},
		{pgv1.PhaseSoaking, 2, status.InProgressStatus},
		{pgv1.PhaseApplyingHard, 2, status.InProgressStatus},
		{pgv1.PhaseVerifying, 2, status.InProgressStatus},
		{pgv1.PhaseRollingBack, 2, status.InProgressStatus},
		{pgv1.PhasePaused, 2, status.InProgressStatus},
		{pgv1.PhaseSucceeded, 2, status.CurrentStatus},
		{pgv1.PhasePlanned, 2, status.CurrentStatus},
		{pgv1.PhaseBlocked, 2, status.FailedStatus},
		{pgv1.PhaseRolledBack, 2, status.FailedStatus},
		{pgv1.PhaseFailed, 2, status.FailedStatus},
		// Target pods Pending after success: a person must act.
		{pgv1.PhaseDegraded, 2, status.FailedStatus},
		{pgv1.PhaseSucceeded, 1, status.InProgressStatus},
	} {
		t.Run(string(tc.phase), func(t *testing.T) {
			raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(MigrationIn(tc.phase, tc.observed))
			if err != nil {
				t.Fatal(err)
			}
			res, err := status.Compute(&unstructured.Unstructured{Object: raw})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tc.want {
				t.Fatalf("kstatus %s (%s), want %s", res.Status, res.Message, tc.want)
			}
		})
	}
}
