package planning

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// PodView says why the pods held of the targets ts do not yet hold every
// pod their workloads' status counts; nil when they do. The plan's pods to
// recreate and the protected pods are judged on them, and a guard judged
// on a view without a target's pods passes what it would refuse: the
// decision waits. The operator's view lags its cache; a plan read from the
// API server sees a gap only where the cluster has one.
//
// A view that stays short because the workload's controller cannot make
// its pods (a quota, an admission refusal, a StatefulSet stopped at a pod
// that is not Ready) never closes by itself: the wait names the cause as
// the controller tells it, and once it has lasted timeout (the stage
// timeout) the migration is Stalled, writing nothing, until the pods
// exist. conditions are the migration's, whose PodsStable records since
// when it has waited.
func PodView(ts []*Target, conditions []metav1.Condition, timeout time.Duration, now time.Time) *Stop {
	for _, t := range ts {
		gap := t.ViewGap()
		if gap == "" {
			continue
		}
		why, since := t.Shortfall()
		if why != "" {
			gap += ": " + why
		}
		if since.IsZero() {
			since = viewGapSince(conditions, now)
		}
		if why != "" && now.Sub(since) >= timeout {
			return &Stop{Reason: pgv1.ReasonTargetPodsMissing, Blocked: true, Message: fmt.Sprintf(
				"%s: %s, since %s, longer than the stage timeout (%s); the migration writes nothing until the pods exist, and goes on by itself then",
				t, gap, since.UTC().Format(time.RFC3339), timeout)}
		}
		return &Stop{Reason: pgv1.ReasonWaitingForPodView, CatchingUp: why == "",
			Message: "Waiting for the pods of " + t.String() + ": " + gap + "; no guard is judged and nothing is written until they are"}
	}
	return nil
}

// viewGapSince is when the migration began to wait for its view of a
// target's pods, as its PodsStable condition records it; now when it was
// not waiting.
func viewGapSince(conditions []metav1.Condition, now time.Time) time.Time {
	if c := meta.FindStatusCondition(conditions, pgv1.ConditionPodsStable); c != nil &&
		(c.Reason == pgv1.ReasonWaitingForPodView || c.Reason == pgv1.ReasonTargetPodsMissing) {
		return c.LastTransitionTime.Time
	}
	return now
}
