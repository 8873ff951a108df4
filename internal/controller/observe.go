package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// observe records one incarnation of a pod.
func observe(p *corev1.Pod) pgv1.PodObservation {
	return pgv1.PodObservation{Name: p.Name, UID: string(p.UID), CreationTimestamp: p.CreationTimestamp, Restarts: restarts(p), NodeName: p.Spec.NodeName}
}

func observeAll(pods []*corev1.Pod) []pgv1.PodObservation {
	out := make([]pgv1.PodObservation, 0, len(pods))
	for _, p := range pods {
		out = append(out, observe(p))
	}
	if len(out) > 64 {
		out = out[:64]
	}
	return out
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	for _, s := range p.Status.InitContainerStatuses {
		n += s.RestartCount
	}
	return n
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// unstable says why the target pods are not yet fit for a stage, and when to
// look again; "" when they are. A pod must be Ready, older than minPodAge and
// must not have restarted since it was last recorded in a stage.
func unstable(ts []*target, recorded map[string]pgv1.PodObservation, minAge time.Duration, now time.Time) (string, time.Duration) {
	var wait time.Duration
	var reasons []string
	for _, t := range ts {
		for _, p := range t.pods {
			switch age := now.Sub(p.CreationTimestamp.Time); {
			case !podReady(p):
				reasons = append(reasons, fmt.Sprintf("%s is not Ready", p.Name))
			case age < minAge:
				reasons = append(reasons, fmt.Sprintf("%s is %s old, younger than guards.minPodAge %s", p.Name, age.Round(time.Second), minAge))
				wait = max(wait, minAge-age)
			}
			if before, ok := recorded[string(p.UID)]; ok && restarts(p) > before.Restarts {
				reasons = append(reasons, fmt.Sprintf("%s restarted %d time(s) since %s", p.Name, restarts(p)-before.Restarts, before.CreationTimestamp.Format(time.RFC3339)))
			}
		}
	}
	if len(reasons) == 0 {
		return "", 0
	}
	sort.Strings(reasons)
	return "Waiting for stable target pods: " + firstFew(reasons, 3), wait
}

// lastRecorded indexes the pods recorded after the targets' last verified
// stage by uid: a restart since then makes a pod unstable.
func lastRecorded(pm *pgv1.PlacementMigration) map[string]pgv1.PodObservation {
	out := map[string]pgv1.PodObservation{}
	for _, ts := range pm.Status.Targets {
		if n := len(ts.Stages); n > 0 {
			for _, o := range ts.Stages[n-1].PodsAfter {
				out[o.UID] = o
			}
		}
	}
	return out
}

// protectedPods lists the pods guards.protectedPods selects.
func (r *PlacementMigrationReconciler) protectedPods(ctx context.Context, pm *pgv1.PlacementMigration) ([]*corev1.Pod, error) {
	if pm.Spec.Guards.ProtectedPods == nil {
		return nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(pm.Spec.Guards.ProtectedPods)
	if err != nil {
		return nil, fmt.Errorf("guards.protectedPods: %w", err)
	}
	var list corev1.PodList
	if err := r.List(ctx, &list, client.InNamespace(pm.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("list protected pods: %w", err)
	}
	var out []*corev1.Pod
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			out = append(out, &list.Items[i])
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// protectedChanged compares the protected pods recorded at the stage's
// start with the live ones: a pod gone, recreated or restarted.
func protectedChanged(recorded []pgv1.PodObservation, live []*corev1.Pod) string {
	byName := map[string]*corev1.Pod{}
	for _, p := range live {
		byName[p.Name] = p
	}
	var changes []string
	for _, o := range recorded {
		p, ok := byName[o.Name]
		switch {
		case !ok:
			changes = append(changes, fmt.Sprintf("%s (uid %s) is gone", o.Name, o.UID))
		case string(p.UID) != o.UID || !p.CreationTimestamp.Equal(&o.CreationTimestamp):
			changes = append(changes, fmt.Sprintf("%s was recreated (uid %s, was %s)", o.Name, p.UID, o.UID))
		case restarts(p) != o.Restarts:
			changes = append(changes, fmt.Sprintf("%s restarted (%d restarts, was %d)", o.Name, restarts(p), o.Restarts))
		}
	}
	return strings.Join(changes, "; ")
}

// rolledOut reports whether the target's controller has rolled out the
// generation we applied, and if not, what it is waiting for.
func rolledOut(t *target, applied int64) (bool, string) {
	if d := t.deployment; d != nil {
		want := ptrOr(d.Spec.Replicas, 1)
		switch {
		case d.Status.ObservedGeneration < max(d.Generation, applied):
			return false, fmt.Sprintf("%s: the Deployment controller has not yet seen generation %d", t, d.Generation)
		case d.Status.UpdatedReplicas < want:
			return false, fmt.Sprintf("%s: %d of %d replicas updated", t, d.Status.UpdatedReplicas, want)
		case d.Status.Replicas > want:
			return false, fmt.Sprintf("%s: %d old replica(s) pending termination", t, d.Status.Replicas-want)
		case d.Status.AvailableReplicas < want:
			return false, fmt.Sprintf("%s: %d of %d updated replicas available", t, d.Status.AvailableReplicas, want)
		}
		return true, ""
	}
	s := t.statefulSet
	want := ptrOr(s.Spec.Replicas, 1)
	switch {
	case s.Status.ObservedGeneration < max(s.Generation, applied):
		return false, fmt.Sprintf("%s: the StatefulSet controller has not yet seen generation %d", t, s.Generation)
	case s.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType && s.Status.UpdateRevision != s.Status.CurrentRevision:
		return false, fmt.Sprintf("%s: %d of %d replicas at revision %s", t, s.Status.UpdatedReplicas, want, s.Status.UpdateRevision)
	case s.Status.ReadyReplicas < want:
		return false, fmt.Sprintf("%s: %d of %d replicas Ready", t, s.Status.ReadyReplicas, want)
	}
	return true, ""
}

// progressDeadlineExceeded reports a Deployment the controller has given up on.
func progressDeadlineExceeded(t *target) bool {
	if t.deployment == nil {
		return false
	}
	for _, c := range t.deployment.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			return true
		}
	}
	return false
}

// unschedulableByConstraint returns the target pods the scheduler has kept
// Pending because of a constraint of our kind, with how long they have
// waited; pods Pending for other reasons (no room at all) are not ours to
// judge.
func unschedulableByConstraint(ts []*target, c placement.Constraint, now time.Time) (string, time.Duration) {
	phrases := []string{placement.ReasonAntiAffinity, placement.ReasonExistingAntiAffinity}
	if c.Spread != nil {
		phrases = []string{placement.ReasonSpread}
	}
	var longest time.Duration
	var worst string
	for _, t := range ts {
		for _, p := range t.pods {
			for _, cond := range p.Status.Conditions {
				if cond.Type != corev1.PodScheduled || cond.Status != corev1.ConditionFalse || cond.Reason != corev1.PodReasonUnschedulable {
					continue
				}
				for _, phrase := range phrases {
					if strings.Contains(cond.Message, phrase) {
						if waited := now.Sub(cond.LastTransitionTime.Time); worst == "" || waited > longest {
							longest, worst = waited, fmt.Sprintf("%s: pod %s is Pending: %s", t, p.Name, cond.Message)
						}
					}
				}
			}
		}
	}
	return worst, longest
}

func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

func firstFew(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, "; ")
	}
	return strings.Join(items[:n], "; ") + fmt.Sprintf(" and %d more", len(items)-n)
}
