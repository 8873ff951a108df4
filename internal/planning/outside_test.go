package planning

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// A target that cannot finish for a cause the migration does not own
// stops it, as the operator and plan observe it alike: its own rollout
// given up, or a pod the scheduler has left Pending beyond the grace. A
// pod within the grace stops nothing yet and sets when to look again.
func TestACauseOutsideTheMigrationStopsIt(t *testing.T) {
	now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	pendingFor := func(d time.Duration) func(ts []*Target) {
		return func(ts []*Target) {
			p := ts[0].Pods[1]
			p.Spec.NodeName, p.Status.Phase = "", corev1.PodPending
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
				Message: "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.", LastTransitionTime: metav1.NewTime(now.Add(-d))}}
		}
	}
	for _, tc := range []struct {
		name        string
		edit        func(ts []*Target)
		reason      string
		message     string
		wantRecheck time.Duration
	}{
		{"pods placed and a rollout that progresses stop nothing", func([]*Target) {}, "", "", 0},
		{"a pod Pending within the grace is looked at again when it runs out", pendingFor(10 * time.Second), "", "", 20 * time.Second},
		{"a pod Pending beyond it stops the migration", pendingFor(45 * time.Second), pgv1.ReasonTargetPodsPending,
			"Deployment/api: pod api-1-1 has been Pending since 2026-12-02T02:59:15Z for a reason the migration's constraint does not cause: 0/3 nodes are available", 0},
		{"so does the target's own rollout given up", func(ts []*Target) {
			d := ts[0].Object().(*appsv1.Deployment)
			d.Generation, d.Status.ObservedGeneration = 4, 4
			d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
				Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "api-2" has timed out progressing.`}}
		}, pgv1.ReasonTargetRolloutFailed, "Deployment/api: its own rollout gave up (Deployment/api exceeded its progress deadline)", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, found := apiCluster(t, corev1.PodSpec{}, 3, 3, 1)
			tc.edit(found)
			stop, recheck := OutsideCause(found, DefaultUnschedulableGrace, now)
			switch {
			case tc.reason == "" && stop != nil:
				t.Fatalf("stopped: %+v", stop)
			case tc.reason != "" && (stop == nil || stop.Reason != tc.reason || !stop.Blocked || !strings.Contains(stop.Message, tc.message)):
				t.Fatalf("stop %+v, want %s saying %q", stop, tc.reason, tc.message)
			}
			if recheck != tc.wantRecheck {
				t.Errorf("look again in %s, want %s", recheck, tc.wantRecheck)
			}
			// plan observes the same cause from the cluster it reads.
			if f := Observe(Situation{Targets: found}, nil, now); (f.Outside == nil) != (stop == nil) || f.Outside != nil && f.Outside.Message != stop.Message {
				t.Errorf("plan observes %+v, the operator %+v", f.Outside, stop)
			}
		})
	}
}
