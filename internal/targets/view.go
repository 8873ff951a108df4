package targets

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// replicaCounts are what a workload's controller reports of its pods: how
// many it is asked for, how many exist and how many run the live
// template, and whether that status describes the live spec.
type replicaCounts struct {
	asked, existing, current int32
	observed                 bool
	// reported says the controller has written a status at all: a
	// manifest read from a file has none.
	reported bool
}

// Reported says whether the workload's controller has written its status
// at all (it observed some generation): a workload read from a live
// cluster has, a manifest read from a file has not, and its status says
// nothing of its pods.
func (t *Target) Reported() bool { return t.kind.counts(t.obj).reported }

// ViewGap says why the pods this target holds cannot be trusted to be all
// the workload has, "" when they can: its controller has not observed the
// live spec yet, has not created the pods it is asked for, or counts more
// pods (or more of the live template's revision) than the target holds.
// The target's pods come from the engine's records, fed by a watch the
// workload's status may be ahead of: a guard judged on the pods seen so
// far passes what it would refuse, a stage that recreates a protected pod
// the view had not reached yet among them. Decide nothing on a target with
// a gap; the next pod event closes it.
func (t *Target) ViewGap() string {
	c := t.kind.counts(t.obj)
	switch {
	case !c.observed:
		return fmt.Sprintf("%s's controller has not yet observed its generation %d", t, t.Generation())
	case c.existing < c.asked:
		return fmt.Sprintf("%s's controller has created %d of its %d pods", t, c.existing, c.asked)
	}
	held, current := 0, 0
	for _, p := range t.Pods {
		if !active(p) {
			continue
		}
		held++
		if t.Workload.Revision != "" && p.Labels[t.Workload.RevisionLabel] == t.Workload.Revision {
			current++
		}
	}
	switch {
	case int32(held) < c.existing:
		return fmt.Sprintf("%d of the %d pods %s's status counts are seen so far", held, c.existing, t)
	case int32(current) < c.current && t.Workload.Revision == "":
		return fmt.Sprintf("the revision of %s's live template is not seen yet, though its status counts %d pods of it", t, c.current)
	case int32(current) < c.current:
		return fmt.Sprintf("%d of the %d pods of %s's live template that its status counts are seen so far", current, c.current, t)
	}
	return ""
}

// Shortfall says, when the target's controller has made fewer pods than it
// is asked for, why (as its own status or pods tell; a generic word when
// they do not) and since when (zero when they do not tell); "" when it
// has made them all.
func (t *Target) Shortfall() (why string, since time.Time) {
	if c := t.kind.counts(t.obj); !c.observed || c.existing >= c.asked {
		return "", time.Time{}
	}
	return t.kind.shortfall(t)
}

// active reports a pod its workload's controller counts: not terminating,
// not finished.
func active(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// countsFrom reads replica counts from the fields every workload's status
// has.
func countsFrom(obj client.Object, asked *int32, existing, current int32, observedGeneration int64) replicaCounts {
	n := int32(1)
	if asked != nil {
		n = *asked
	}
	return replicaCounts{asked: n, existing: existing, current: current, observed: observedGeneration >= obj.GetGeneration(), reported: observedGeneration > 0}
}
