package controller

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// pausedTargets names the targets told not to roll out.
func pausedTargets(ts []*target) []string {
	var out []string
	for _, t := range ts {
		if t.Paused() {
			out = append(out, t.String())
		}
	}
	return out
}

// outsideCause is a cause outside the migration that stops the group
// (planning.OutsideCause) with the operator's grace for Pending pods; it
// looks again when the grace of the youngest Pending pod runs out.
func (s *scope) outsideCause(group []*target) *planning.Stop {
	stop, recheck := planning.OutsideCause(planned(group), s.r.UnschedulableGrace, s.now)
	if stop == nil {
		s.lookAgainIn(recheck)
	}
	return stop
}

// pauseClock stops an operation's stage timeout while a target is paused:
// it notes when the pause was first seen, and on the resume moves the
// point the timeout counts from by the time the pause took. It reports
// whether a target is paused now.
func (s *scope) pauseClock(op *pgv1.Operation) []string {
	var ts []*target
	for _, ot := range op.Targets {
		if t := s.target(ot.Kind, ot.Name); t != nil {
			ts = append(ts, t)
		}
	}
	paused := pausedTargets(ts)
	switch {
	case len(paused) > 0 && op.PausedAt == nil:
		op.PausedAt = &metav1.Time{Time: s.now}
	case len(paused) == 0 && op.PausedAt != nil:
		from := timeoutFrom(op).Add(s.now.Sub(op.PausedAt.Time))
		op.TimeoutFrom = &metav1.Time{Time: from}
		op.PausedAt = nil
	}
	return paused
}

// timeoutFrom is when an operation's stage timeout counts from.
func timeoutFrom(op *pgv1.Operation) time.Time {
	if op.TimeoutFrom != nil {
		return op.TimeoutFrom.Time
	}
	return op.StartedAt.Time
}

// deadline is when an operation's stage timeout runs out.
func (s *scope) deadline(op *pgv1.Operation) time.Time {
	return timeoutFrom(op).Add(s.pm.Spec.Timeout())
}

// pendingWhy names the first of the pods the scheduler leaves Pending and
// its word on it, for a message; "" when none is.
func pendingWhy(pods []*corev1.Pod) string {
	for _, p := range pods {
		if _, msg, ok := planning.Unschedulable(p); ok {
			return fmt.Sprintf("pod %s is Pending: %s", p.Name, msg)
		}
	}
	return ""
}
