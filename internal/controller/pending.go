package controller

import (
	"context"

	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// After success the constraint stays in the targets while the cluster
// changes under it. A migration whose target pods then stay Pending says
// so, with the cause the scheduler and the engine agree on
// (planning.Pending), instead of reporting Succeeded over Pending pods.

// pendingAfterSuccess looks at the pods of a migration that has succeeded.
// Pods the scheduler has called unschedulable for longer than the grace
// degrade it; pods not yet that long ask for another look when they are.
// Pods for which room has appeared since hold the verdict as it stands
// (heldPending) until the scheduler binds them or they go.
func (s *scope) pendingAfterSuccess(ctx context.Context, final pgv1.Stage) (outcome, bool, error) {
	var found []planning.PendingPods
	var recheck time.Duration
	err := s.r.State.With(ctx, func(snap *placement.Snapshot) error {
		var err error
		found, recheck, err = planning.Pending(snap, &s.pm.Spec, planned(s.targets), func(t *planning.Target) *corev1.PodSpec {
			return planning.EntryOf(s.status(t.Ref).Applied)
		}, s.now, s.r.UnschedulableGrace)
		return err
	})
	if err != nil {
		return outcome{}, false, err
	}
	v := planning.DescribePending(final, found)
	if v.ByConstraint+v.Other == 0 {
		return s.heldPending(found, recheck)
	}
	return outcome{degraded: true, reason: v.Reason, message: v.Message,
		pendingByConstraint: v.ByConstraint, pendingOther: v.Other, after: recheck}, true, nil
}

// heldPending is the verdict on a succeeded migration whose late Pending
// pods, if any, all have room now. The scheduler places such a pod on its
// next try, or its workload deletes it (a scale-down frees a node before
// it deletes the surplus Pending pods): a migration Degraded over them
// stays Degraded, saying so, until they are bound or gone, and one
// Succeeded stays Succeeded. Either way its Ready condition does not
// flip for a pod that is still Pending, nor back when the room proves
// brief.
func (s *scope) heldPending(found []planning.PendingPods, recheck time.Duration) (outcome, bool, error) {
	n, msg := planning.DescribePlaceable(found)
	ready := meta.FindStatusCondition(s.pm.Status.Conditions, pgv1.ConditionReady)
	if n == 0 || ready == nil || ready.Status != metav1.ConditionFalse || ready.ObservedGeneration != s.pm.Generation ||
		(ready.Reason != pgv1.ReasonConstraintUnsatisfied && ready.Reason != pgv1.ReasonTargetPodsPending) {
		return outcome{after: recheck}, false, nil
	}
	o := outcome{degraded: true, reason: ready.Reason, message: msg, after: recheck}
	if ready.Reason == pgv1.ReasonConstraintUnsatisfied {
		o.pendingByConstraint = n
	} else {
		o.pendingOther = n
	}
	return o, true, nil
}

// unschedulableByConstraint returns the target pod the stage's entry has
// kept Pending longest, and for how long (planning.KeptOutLongest).
func (s *scope) unschedulableByConstraint(ctx context.Context, t *target, entry *corev1.PodSpec) (string, time.Duration, error) {
	var worst string
	var longest time.Duration
	err := s.r.State.With(ctx, func(snap *placement.Snapshot) error {
		var err error
		worst, longest, err = planning.KeptOutLongest(snap, t.Target, entry, s.now)
		return err
	})
	return worst, longest, err
}
