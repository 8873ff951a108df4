package planning

import (
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/placement-guard/placement-guard/internal/brief"
	"github.com/placement-guard/placement-guard/internal/targets"
)

// Whether the targets' pods are fit for a stage: a fact of the decision
// (Facts.Unstable) that the operator and plan observe alike.

// LastStart is when the pod's containers last (re)started: the latest
// running container's start, or the pod's creation without one.
func LastStart(p *corev1.Pod) time.Time {
	t := p.CreationTimestamp.Time
	for _, s := range p.Status.ContainerStatuses {
		if s.State.Running != nil && s.State.Running.StartedAt.After(t) {
			t = s.State.Running.StartedAt.Time
		}
		if s.LastTerminationState.Terminated != nil && s.LastTerminationState.Terminated.FinishedAt.After(t) {
			t = s.LastTerminationState.Terminated.FinishedAt.Time
		}
	}
	return t
}

// Unstable says why pods are not yet fit for a stage and when that can
// change; "" when they are. A pod must be Ready and its containers must
// have run without a restart for minAge: a crash-looping pod that is Ready
// for a moment does not pass. Messages give times, not ages, so that they
// do not change while nothing does.
func Unstable(pods []*corev1.Pod, minAge time.Duration, now time.Time) (string, time.Time) {
	var reasons []string
	var next time.Time
	for _, p := range pods {
		ready, since := targets.PodReady(p)
		if !ready {
			reasons = append(reasons, p.Name+" is not Ready")
			continue
		}
		stableAt := LastStart(p)
		if since.After(stableAt) {
			stableAt = since
		}
		stableAt = stableAt.Add(minAge)
		if now.Before(stableAt) {
			reasons = append(reasons, fmt.Sprintf("%s is stable at %s (guards.minPodAge %s since it became Ready or last started)", p.Name, stableAt.UTC().Format(time.RFC3339), minAge))
			if next.IsZero() || stableAt.Before(next) {
				next = stableAt
			}
		}
	}
	if len(reasons) == 0 {
		return "", time.Time{}
	}
	sort.Strings(reasons)
	return "Waiting for stable target pods: " + brief.FirstFew(reasons, 3, "; "), next
}
