package controller

import (
	"context"

	"time"

	corev1 "k8s.io/api/core/v1"

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
	if err != nil || len(found) == 0 {
		return outcome{after: recheck}, false, err
	}
	v := planning.DescribePending(final, found)
	return outcome{degraded: true, reason: v.Reason, message: v.Message,
		pendingByConstraint: v.ByConstraint, pendingOther: v.Other, after: recheck}, true, nil
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
