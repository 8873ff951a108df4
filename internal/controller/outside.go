package controller

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// Causes outside the migration. A target can stop rolling out for a reason
// the migration's constraint does not cause: its own template moved to
// nodes that do not exist, its rollout gave up, a person paused it.
// Waiting on the constraint then would tell a dashboard the wrong story:
// the migration names the cause, says whether a person is needed, and
// goes on by itself once the cause is gone.

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

// stuckOutside reports targets of the group that cannot finish for a
// cause the migration does not own, before it writes a stage or while a
// stage soaks: pods the scheduler has left Pending longer than the grace
// (a soft constraint never leaves a pod Pending), or the target's own
// rollout given up. It is asked only with no operation in flight, so the
// rollout it judges is not one the migration started. The migration is
// Stalled, writes nothing, and looks again when the grace of the youngest
// Pending pod runs out.
func (s *scope) stuckOutside(group []*target) (outcome, bool, time.Duration) {
	grace := s.r.UnschedulableGrace
	var recheck time.Duration
	for _, t := range group {
		if p := t.Progress(t.Generation()); p.Failed {
			return outcome{blocked: true, reason: pgv1.ReasonTargetRolloutFailed, message: fmt.Sprintf(
				"%s: its own rollout gave up (%s), for a change the migration did not make; the migration writes nothing until it rolls out, and goes on by itself then",
				t, p.Message)}, true, 0
		}
		for _, pod := range t.Pods {
			since, msg, ok := planning.Unschedulable(pod)
			if !ok {
				continue
			}
			waited := s.now.Sub(since)
			if waited < grace {
				recheck = planning.Shortest(recheck, grace-waited)
				continue
			}
			return outcome{blocked: true, reason: pgv1.ReasonTargetPodsPending, message: fmt.Sprintf(
				"%s: pod %s has been Pending for %s for a reason the migration's constraint does not cause: %s. The migration writes nothing until the target's pods are placed, and goes on by itself then",
				t, pod.Name, waited.Round(time.Second), msg)}, true, 0
		}
	}
	return outcome{}, false, recheck
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
