package controller

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// podsUnstable says why the group's pods are not yet fit for a stage
// (planning.Unstable), "" when they are, and when that can change.
func (s *scope) podsUnstable(group []*target) (string, time.Time) {
	var pods []*corev1.Pod
	for _, t := range group {
		pods = append(pods, t.Pods...)
	}
	return planning.Unstable(pods, s.pm.Spec.MinPodAge(), s.now)
}

// recordPods sets PodsStable from what the decision judged of the pods,
// and looks again when they can be stable.
func (s *scope) recordPods(why string, next time.Time) {
	if why == "" {
		setCondition(s.pm, s.now, pgv1.ConditionPodsStable, metav1.ConditionTrue, pgv1.ReasonPodsStable,
			"Every target pod is Ready and has run without a restart for guards.minPodAge")
		return
	}
	setCondition(s.pm, s.now, pgv1.ConditionPodsStable, metav1.ConditionFalse, pgv1.ReasonWaitingForPods, why)
	if !next.IsZero() {
		s.lookAgainIn(next.Sub(s.now))
	}
}

// waitForCompleteView waits while a target's pods, from the engine's
// records, do not yet hold every pod its workload's status counts: the
// plan's pods to recreate and the protected pods are judged on them, and
// a guard judged on a view without a target's pods passes what it would
// refuse. The next pod event brings the reconcile that goes on; a short
// timer stands in for one that was missed.
//
// A view that stays short because the workload's controller cannot make
// its pods (a quota, an admission refusal, a StatefulSet stopped at a pod
// that is not Ready) never closes by itself: the wait names the cause as
// the controller tells it, and once it has lasted the stage timeout the
// migration is Stalled, writing nothing, until the pods exist. A stage
// that only lowers the constraint asks nothing of the pods and is never
// held.
func (s *scope) waitForCompleteView(group []*target, lowering bool) (outcome, bool) {
	if lowering {
		return outcome{}, false
	}
	for _, t := range group {
		gap := t.ViewGap()
		if gap == "" {
			continue
		}
		why, since := t.Shortfall()
		if why != "" {
			gap += ": " + why
		}
		if since.IsZero() {
			since = s.viewGapSince()
		}
		if waited, timeout := s.now.Sub(since), s.pm.Spec.Timeout(); why != "" && waited >= timeout {
			msg := fmt.Sprintf("%s: %s, for %s, longer than the stage timeout (%s); the migration writes nothing until the pods exist, and goes on by itself then",
				t, gap, waited.Round(time.Second), timeout)
			setCondition(s.pm, s.now, pgv1.ConditionPodsStable, metav1.ConditionFalse, pgv1.ReasonTargetPodsMissing, msg)
			return outcome{blocked: true, reason: pgv1.ReasonTargetPodsMissing, message: msg, after: podViewRecheck}, true
		}
		msg := "Waiting for the pods of " + t.String() + ": " + gap + "; no guard is judged and nothing is written until they are"
		if c := meta.FindStatusCondition(s.pm.Status.Conditions, pgv1.ConditionPodsStable); c != nil && c.Reason != pgv1.ReasonWaitingForPodView {
			// The wait counts from now: the condition's time is its own.
			meta.RemoveStatusCondition(&s.pm.Status.Conditions, pgv1.ConditionPodsStable)
		}
		setCondition(s.pm, s.now, pgv1.ConditionPodsStable, metav1.ConditionFalse, pgv1.ReasonWaitingForPodView, msg)
		return outcome{reason: pgv1.ReasonWaitingForPodView, message: msg, after: podViewRecheck}, true
	}
	return outcome{}, false
}

// viewGapSince is when the migration began to wait for its view of a
// target's pods, as its PodsStable condition records it; now when it was
// not waiting.
func (s *scope) viewGapSince() time.Time {
	if c := meta.FindStatusCondition(s.pm.Status.Conditions, pgv1.ConditionPodsStable); c != nil &&
		(c.Reason == pgv1.ReasonWaitingForPodView || c.Reason == pgv1.ReasonTargetPodsMissing) {
		return c.LastTransitionTime.Time
	}
	return s.now
}

// podViewRecheck is how soon a migration waiting for its view of a
// target's pods looks again without an event.
const podViewRecheck = 5 * time.Second

// protectedPods lists the pods guards.protectedPods selects.
func (s *scope) protectedPods() ([]*corev1.Pod, error) {
	sel := s.pm.Spec.Protected()
	if sel == nil {
		return nil, nil
	}
	selector, err := metav1.LabelSelectorAsSelector(sel.AsMeta())
	if err != nil {
		return nil, fmt.Errorf("guards.protectedPods: %w", err)
	}
	// From the engine's records, by name; nothing here changes them.
	return s.r.State.PodsSelected(s.pm.Namespace, selector), nil
}

// protectedChange compares the live protected pods with their record.
func (s *scope) protectedChange() (string, error) {
	if s.pm.Status.ProtectedPods == nil {
		return "", nil
	}
	live, err := s.protectedPods()
	if err != nil {
		return "", err
	}
	return protectedChanged(s.pm.Status.ProtectedPods, live), nil
}
