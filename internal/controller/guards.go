package controller

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// checkPodsStable waits until every pod of the group is Ready and has run
// without a restart for guards.minPodAge.
func (s *scope) checkPodsStable(group []*target, waiting pgv1.Phase) (outcome, bool) {
	var pods []*corev1.Pod
	for _, t := range group {
		pods = append(pods, t.Pods...)
	}
	why, next := unstable(pods, s.pm.Spec.MinPodAge(), s.now)
	if why == "" {
		setCondition(s.pm, s.now, pgv1.ConditionPodsStable, metav1.ConditionTrue, pgv1.ReasonPodsStable,
			"Every target pod is Ready and has run without a restart for guards.minPodAge")
		return outcome{}, false
	}
	setCondition(s.pm, s.now, pgv1.ConditionPodsStable, metav1.ConditionFalse, pgv1.ReasonWaitingForPods, why)
	o := outcome{phase: waiting, reason: pgv1.ReasonWaitingForPods, message: why}
	if !next.IsZero() {
		o.after = next.Sub(s.now)
	}
	return o, true
}

// protectedPods lists the pods guards.protectedPods selects.
func (s *scope) protectedPods(ctx context.Context) ([]*corev1.Pod, error) {
	sel := s.pm.Spec.Protected()
	if sel == nil {
		return nil, nil
	}
	selector, err := metav1.LabelSelectorAsSelector(sel.AsMeta())
	if err != nil {
		return nil, fmt.Errorf("guards.protectedPods: %w", err)
	}
	// The cache's own objects, not copied: nothing here changes them.
	var list corev1.PodList
	if err := s.r.List(ctx, &list, client.InNamespace(s.pm.Namespace), client.MatchingLabelsSelector{Selector: selector}, client.UnsafeDisableDeepCopy); err != nil {
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

// protectedChange compares the live protected pods with their record.
func (s *scope) protectedChange(ctx context.Context) (string, error) {
	if s.pm.Status.ProtectedPods == nil {
		return "", nil
	}
	live, err := s.protectedPods(ctx)
	if err != nil {
		return "", err
	}
	return protectedChanged(s.pm.Status.ProtectedPods, live), nil
}

func recreatesProtected(recreated map[string][]string, protected []*corev1.Pod) string {
	names := map[string]bool{}
	for _, p := range protected {
		names[p.Name] = true
	}
	var hits []string
	for ref, pods := range recreated {
		for _, n := range pods {
			if names[n] {
				hits = append(hits, fmt.Sprintf("%s (of %s)", n, ref))
			}
		}
	}
	sort.Strings(hits)
	return firstFew(hits, 5)
}
