package planning

import (
	"fmt"
	"strings"
	"time"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// Causes outside the migration. A target can stop rolling out for a reason
// the migration's constraint does not cause: its own template moved to
// nodes that do not exist, its rollout gave up, a person paused it.
// Waiting on the constraint then would tell a dashboard the wrong story:
// the migration names the cause, says whether a person is needed, and
// goes on by itself once the cause is gone. The operator and plan observe
// these causes alike and hand them to Decide.

// Stop is a fact that holds a stage by itself: the reason and the words of
// what the migration says, and whether a person is needed (Blocked) or
// the migration only waits.
type Stop struct {
	Reason, Message string
	Blocked         bool
	// CatchingUp: a pod view that lags with no cause known, which closes
	// by itself within moments.
	CatchingUp bool
}

// MaxTargets is how many workloads a migration's status records.
const MaxTargets = 50

// DefaultUnschedulableGrace is how long a target pod may stay Pending
// before the migration acts on it (the operator's --unschedulable-grace):
// a stage it wrote is rolled back, a cause outside it stops it. Long
// enough for a cluster autoscaler to add a node.
const DefaultUnschedulableGrace = 30 * time.Second

// TooManyTargets stops a migration whose selector selects more workloads
// than its status records; nil when it selects few enough.
func TooManyTargets(selected int) *Stop {
	if selected <= MaxTargets {
		return nil
	}
	return &Stop{Reason: pgv1.ReasonTooManyTargets, Blocked: true, Message: fmt.Sprintf(
		"spec.targetSelector selects %d workloads; a migration records at most %d. Narrow the selector or split the migration; nothing was changed", selected, MaxTargets)}
}

// OutsideCause is the first target of ts that cannot finish for a cause
// the migration does not own: its own rollout given up, or a pod the
// scheduler has left Pending longer than grace (a soft constraint never
// leaves a pod Pending). nil when none, with how soon the grace of the
// youngest Pending pod runs out (0 for none). It is asked with no write
// of the migration in flight, so the rollout it judges is not one the
// migration started.
func OutsideCause(ts []*Target, grace time.Duration, now time.Time) (*Stop, time.Duration) {
	var recheck time.Duration
	for _, t := range ts {
		if p := t.Progress(t.Generation()); p.Failed {
			return &Stop{Reason: pgv1.ReasonTargetRolloutFailed, Blocked: true, Message: fmt.Sprintf(
				"%s: its own rollout gave up (%s), for a change the migration did not make; the migration writes nothing until it rolls out, and goes on by itself then",
				t, p.Message)}, 0
		}
		late, next := pendingBeyond(t.Pods, grace, now)
		if len(late) > 0 {
			// Since when, not for how long: the words stay the same from
			// one reconcile to the next, and in plan.
			return &Stop{Reason: pgv1.ReasonTargetPodsPending, Blocked: true, Message: fmt.Sprintf(
				"%s: pod %s has been Pending since %s for a reason the migration's constraint does not cause: %s. The migration writes nothing until the target's pods are placed, and goes on by itself then",
				t, late[0].pod.Name, late[0].since.UTC().Format(time.RFC3339), strings.TrimRight(late[0].why, "."))}, 0
		}
		recheck = Shortest(recheck, next)
	}
	return nil, recheck
}
