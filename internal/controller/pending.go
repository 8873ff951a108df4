package controller

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// After success the constraint stays in the targets while the cluster
// changes under it: a scale-up beyond the qualifying nodes, a node lost.
// A migration whose target pods then stay Pending says so, with the cause
// the scheduler and the engine agree on, instead of reporting Succeeded
// over Pending pods.

// pendingPods are the target pods of one workload that stayed Pending past
// the grace, split by what keeps them out.
type pendingPods struct {
	target *target
	// byConstraint are kept out by the migration's constraint: the
	// scheduler says so, and the engine places them without it.
	byConstraint []string
	// other are kept out by something else; why is the scheduler's word on
	// the first of them.
	other []string
	why   string
	// shortfall is the capacity the constraint needs, e.g. "4 of 6
	// qualifying nodes (pool=d2s)"; "" when nodes are not what is missing.
	shortfall string
}

// pendingAfterSuccess looks at the pods of a migration that has succeeded.
// Pods the scheduler has called unschedulable for longer than the grace
// degrade it; pods not yet that long ask for another look when they are.
func (s *scope) pendingAfterSuccess(final placement.Stage) (outcome, bool, error) {
	grace := s.r.UnschedulableGrace
	var found []pendingPods
	var recheck time.Duration
	err := s.r.State.With(func(snap *placement.Snapshot) error {
		for _, t := range s.targets {
			entry := entryOf(s.status(t.Ref).Applied)
			c := placement.ConstraintOf(entry)
			pp := pendingPods{target: t}
			for _, p := range t.Pods {
				since, msg, ok := unschedulable(p)
				if !ok {
					continue
				}
				if waited := s.now.Sub(since); waited < grace {
					recheck = shortest(recheck, grace-waited)
					continue
				}
				cause, err := snap.WhyPending(p, entry)
				if err != nil {
					return err
				}
				switch {
				case cause.Verdict.Schedulable:
					// Room has appeared; the scheduler has not got to it.
				case cause.ByConstraint:
					pp.byConstraint = append(pp.byConstraint, p.Name)
				default:
					if pp.why == "" {
						pp.why = msg
					}
					pp.other = append(pp.other, p.Name)
				}
			}
			if len(pp.byConstraint) > 0 {
				spec := planning.CapacityFromSpec(s.pm.Spec.Capacity)
				// What the constraint needs for the replicas wanted now,
				// not the minimum the spec asked for before the hard stage.
				spec.MinNodes, spec.MinDomains = nil, nil
				capacity, err := snap.CapacityFor([]*placement.Workload{t.Workload}, c, spec)
				if err != nil {
					return err
				}
				pp.shortfall = capacity.Shortfall(c.TopologyKey())
			}
			if len(pp.byConstraint)+len(pp.other) > 0 {
				found = append(found, pp)
			}
		}
		return nil
	})
	if err != nil || len(found) == 0 {
		return outcome{after: recheck}, false, err
	}
	o := s.degraded(final, found)
	o.after = recheck
	return o, true, nil
}

// degraded words the outcome: the constraint's doing first, since that is
// what the migration owns; pods kept out by something else are named with
// a reason of their own, so nobody removes a constraint that is not the
// problem.
func (s *scope) degraded(final placement.Stage, found []pendingPods) outcome {
	var ours, theirs []string
	o := outcome{degraded: true}
	for _, pp := range found {
		t := pp.target
		if n := len(pp.byConstraint); n > 0 {
			o.pendingByConstraint += n
			msg := fmt.Sprintf("%d of %d pods of %s Pending because of the %s constraint (%s)", n, t.Workload.Replicas, t, final, firstFew(pp.byConstraint, 3))
			if pp.shortfall != "" {
				msg += fmt.Sprintf(": it needs more qualifying capacity, %s; add nodes or lower the replicas", pp.shortfall)
			}
			ours = append(ours, msg)
		}
		if n := len(pp.other); n > 0 {
			o.pendingOther += n
			theirs = append(theirs, fmt.Sprintf("%d of %d pods of %s Pending for a reason the constraint does not cause (%s): %s",
				n, t.Workload.Replicas, t, firstFew(pp.other, 3), pp.why))
		}
	}
	o.reason, o.message = pgv1.ReasonTargetPodsPending, strings.Join(theirs, "; ")
	if len(ours) > 0 {
		o.reason, o.message = pgv1.ReasonConstraintUnsatisfied, strings.Join(append(ours, theirs...), "; ")
	}
	return o
}

// unschedulableByConstraint returns the target pod the stage's entry has
// kept Pending longest, and for how long: the scheduler has found no node
// for it, and the engine, on the cluster as it is, finds that the entry is
// what keeps it out (it fits a node without it). Pods Pending for other
// reasons (no room at all, a taint) are not the stage's doing, and a pod
// that fits somewhere now waits for the scheduler's next try.
func (s *scope) unschedulableByConstraint(t *target, entry *corev1.PodSpec) (string, time.Duration, error) {
	var longest time.Duration
	var worst string
	err := s.r.State.With(func(snap *placement.Snapshot) error {
		for _, p := range t.Pods {
			since, msg, ok := unschedulable(p)
			if !ok {
				continue
			}
			waited := s.now.Sub(since)
			if worst != "" && waited <= longest {
				continue
			}
			cause, err := snap.WhyPending(p, entry)
			if err != nil {
				return err
			}
			if cause.ByConstraint {
				longest, worst = waited, fmt.Sprintf("pod %s is Pending: %s", p.Name, msg)
			}
		}
		return nil
	})
	return worst, longest, err
}

// unschedulable reports since when and why the scheduler has found no node
// for a pod it has not bound; a gated pod has not been tried.
func unschedulable(p *corev1.Pod) (time.Time, string, bool) {
	if p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
		return time.Time{}, "", false
	}
	return unschedulableCondition(p)
}

// unschedulableCondition reads the scheduler's Unschedulable verdict on a
// pod: since when and its message.
func unschedulableCondition(p *corev1.Pod) (time.Time, string, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.LastTransitionTime.Time, c.Message, true
		}
	}
	return time.Time{}, "", false
}

// shortest is the sooner of two timers, 0 standing for none.
func shortest(a, b time.Duration) time.Duration {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}
