package planning

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/brief"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// After success the constraint stays in the targets while the cluster
// changes under it: a scale-up beyond the qualifying nodes, a node lost.
// Pods the scheduler leaves Pending are judged here, with the cause the
// scheduler and the engine agree on, so that a migration says why instead
// of reporting success over Pending pods; and during a stage, the pod its
// entry keeps out longest is what rolls the stage back.

// PendingPods are the target pods of one workload that stayed Pending past
// the grace, split by what keeps them out.
type PendingPods struct {
	Target *Target
	// ByConstraint are kept out by the migration's constraint: the
	// scheduler says so, and the engine places them without it.
	ByConstraint []string
	// Other are kept out by something else; Why is the scheduler's word on
	// the first of them.
	Other []string
	Why   string
	// Placeable are Pending for which room has appeared since: the engine
	// places them with the constraint, and the scheduler has not bound
	// them yet.
	Placeable []string
	// Shortfall is the capacity the constraint needs, e.g. "4 of 6
	// qualifying nodes (pool=d2s)"; "" when nodes are not what is missing.
	Shortfall string
}

// Pending judges the targets' pods the scheduler has called unschedulable
// for longer than grace, each against the entry its target carries
// (entryOf); recheck is when the next pod not yet that long will be.
func Pending(snap *placement.Snapshot, spec *pgv1.PlacementMigrationSpec, ts []*Target, entryOf func(*Target) *corev1.PodSpec, now time.Time, grace time.Duration) (found []PendingPods, recheck time.Duration, err error) {
	for _, t := range ts {
		entry := entryOf(t)
		pp := PendingPods{Target: t}
		late, next := pendingBeyond(t.Pods, grace, now)
		recheck = Shortest(recheck, next)
		for _, lp := range late {
			p, msg := lp.pod, lp.why
			cause, err := snap.WhyPending(p, entry)
			if err != nil {
				return nil, 0, err
			}
			switch {
			case cause.Verdict.Schedulable:
				// Room has appeared; the scheduler has not got to it.
				pp.Placeable = append(pp.Placeable, p.Name)
			case cause.ByConstraint:
				pp.ByConstraint = append(pp.ByConstraint, p.Name)
			default:
				if pp.Why == "" {
					pp.Why = msg
				}
				pp.Other = append(pp.Other, p.Name)
			}
		}
		if len(pp.ByConstraint) > 0 {
			capacity := CapacityFromSpec(spec.Capacity)
			// What the constraint needs for the replicas wanted now, not
			// the minimum the spec asked for before the hard stage.
			capacity.MinNodes, capacity.MinDomains = nil, nil
			c := placement.ConstraintOf(entry)
			have, err := snap.CapacityFor([]*placement.Workload{t.Workload}, c, capacity)
			if err != nil {
				return nil, 0, err
			}
			pp.Shortfall = have.Shortfall(c.TopologyKey())
		}
		if len(pp.ByConstraint)+len(pp.Other)+len(pp.Placeable) > 0 {
			found = append(found, pp)
		}
	}
	return found, recheck, nil
}

// PendingVerdict words what Pending found: the constraint's doing first,
// since that is what the migration owns; pods kept out by something else
// are named with a reason of their own, so nobody removes a constraint
// that is not the problem.
type PendingVerdict struct {
	Reason, Message     string
	ByConstraint, Other int
}

// DescribePending words the pods Pending under the constraint at final.
func DescribePending(final pgv1.Stage, found []PendingPods) PendingVerdict {
	var ours, theirs []string
	var v PendingVerdict
	for _, pp := range found {
		t := pp.Target
		if n := len(pp.ByConstraint); n > 0 {
			v.ByConstraint += n
			msg := fmt.Sprintf("%d of %d pods of %s Pending because of the %s constraint (%s)", n, t.Workload.Replicas, t, final, brief.FirstFew(pp.ByConstraint, 3, "; "))
			if pp.Shortfall != "" {
				msg += fmt.Sprintf(": it needs more qualifying capacity, %s; add nodes or lower the replicas", pp.Shortfall)
			}
			ours = append(ours, msg)
		}
		if n := len(pp.Other); n > 0 {
			v.Other += n
			theirs = append(theirs, fmt.Sprintf("%d of %d pods of %s Pending for a reason the constraint does not cause (%s): %s",
				n, t.Workload.Replicas, t, brief.FirstFew(pp.Other, 3, "; "), pp.Why))
		}
	}
	v.Reason, v.Message = pgv1.ReasonTargetPodsPending, strings.Join(theirs, "; ")
	if len(ours) > 0 {
		v.Reason, v.Message = pgv1.ReasonConstraintUnsatisfied, strings.Join(append(ours, theirs...), "; ")
	}
	return v
}

// DescribePlaceable words the pods of found that are still Pending though
// room has appeared for them ("" when there are none), and counts them.
func DescribePlaceable(found []PendingPods) (int, string) {
	var n int
	var parts []string
	for _, pp := range found {
		if len(pp.Placeable) == 0 {
			continue
		}
		n += len(pp.Placeable)
		parts = append(parts, fmt.Sprintf("%d of %d pods of %s still Pending (%s)", len(pp.Placeable), pp.Target.Workload.Replicas, pp.Target, brief.FirstFew(pp.Placeable, 3, "; ")))
	}
	if n == 0 {
		return 0, ""
	}
	return n, strings.Join(parts, "; ") + ": room has appeared for them, and the scheduler has not placed them yet"
}

// KeptOutLongest is the target pod the entry has kept Pending longest,
// and for how long: the scheduler has found no node for it, and the
// engine, on the cluster as it is, finds that the entry is what keeps it
// out (it fits a node without it). Pods Pending for other reasons (no room
// at all, a taint) are not the entry's doing, and a pod that fits
// somewhere now waits for the scheduler's next try.
func KeptOutLongest(snap *placement.Snapshot, t *Target, entry *corev1.PodSpec, now time.Time) (string, time.Duration, error) {
	var longest time.Duration
	var worst string
	for _, p := range t.Pods {
		since, msg, ok := Unschedulable(p)
		if !ok {
			continue
		}
		waited := now.Sub(since)
		if worst != "" && waited <= longest {
			continue
		}
		cause, err := snap.WhyPending(p, entry)
		if err != nil {
			return "", 0, err
		}
		if cause.ByConstraint {
			longest, worst = waited, fmt.Sprintf("pod %s is Pending: %s", p.Name, msg)
		}
	}
	return worst, longest, nil
}

// Unschedulable reports since when and why the scheduler has found no node
// for a pod it has not bound; a gated pod has not been tried.
func Unschedulable(p *corev1.Pod) (time.Time, string, bool) {
	if p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
		return time.Time{}, "", false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.LastTransitionTime.Time, c.Message, true
		}
	}
	return time.Time{}, "", false
}

// pendingPod is a pod the scheduler has left unschedulable, since when and
// its word on it.
type pendingPod struct {
	pod   *corev1.Pod
	since time.Time
	why   string
}

// pendingBeyond are the pods the scheduler has left unschedulable for
// grace or longer, in their order, and how soon the next of the others
// will have been (0 for none).
func pendingBeyond(pods []*corev1.Pod, grace time.Duration, now time.Time) (late []pendingPod, recheck time.Duration) {
	for _, p := range pods {
		since, msg, ok := Unschedulable(p)
		if !ok {
			continue
		}
		if waited := now.Sub(since); waited < grace {
			recheck = Shortest(recheck, grace-waited)
			continue
		}
		late = append(late, pendingPod{pod: p, since: since, why: msg})
	}
	return late, recheck
}

// Shortest is the soonest of the timers, 0 standing for none.
func Shortest(timers ...time.Duration) time.Duration {
	var soonest time.Duration
	for _, d := range timers {
		if d != 0 && (soonest == 0 || d < soonest) {
			soonest = d
		}
	}
	return soonest
}
