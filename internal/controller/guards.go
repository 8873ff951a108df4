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

// podsUnstable says why the group's pods are not fit for a stage written
// at at (planning.Unstable), "" when they are, and when that can change.
func (s *scope) podsUnstable(group []*target, at time.Time) (string, time.Time) {
	var pods []*corev1.Pod
	for _, t := range group {
		pods = append(pods, t.Pods...)
	}
	return planning.Unstable(pods, s.pm.Spec.MinPodAge(), at)
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

// podView says why the group's pods, from the engine's records, do not
// yet hold every pod its workloads' status counts (planning.PodView); nil
// when they do. The next pod event brings the reconcile that goes on; a
// short timer stands in for one that was missed.
func (s *scope) podView(group []*target) *planning.Stop {
	return planning.PodView(planned(group), s.pm.Status.Conditions, s.pm.Spec.Timeout(), s.now)
}

// waitedForPodView records a decision that stops at the pod view in the
// PodsStable condition, which the wait counts from, and looks again soon;
// it reports whether the decision stopped there.
func (s *scope) waitedForPodView(d planning.Decision) bool {
	if d.Reason != pgv1.ReasonWaitingForPodView && d.Reason != pgv1.ReasonTargetPodsMissing {
		return false
	}
	if c := meta.FindStatusCondition(s.pm.Status.Conditions, pgv1.ConditionPodsStable); c != nil && d.Reason == pgv1.ReasonWaitingForPodView && c.Reason != pgv1.ReasonWaitingForPodView {
		// The wait counts from now: the condition's time is its own.
		meta.RemoveStatusCondition(&s.pm.Status.Conditions, pgv1.ConditionPodsStable)
	}
	setCondition(s.pm, s.now, pgv1.ConditionPodsStable, metav1.ConditionFalse, d.Reason, d.Message)
	s.lookAgainIn(podViewRecheck)
	return true
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
