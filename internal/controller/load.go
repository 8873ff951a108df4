package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/targets"
)

// target is one workload of a migration as read from the cache: the
// controller object, the engine's view of it and its live pods.
type target struct {
	ref         pgv1.TargetRef
	deployment  *appsv1.Deployment
	statefulSet *appsv1.StatefulSet
	workload    *placement.Workload
	pods        []*corev1.Pod
}

func (t *target) String() string { return string(t.ref.Kind) + "/" + t.ref.Name }

func (t *target) object() client.Object {
	if t.deployment != nil {
		return t.deployment
	}
	return t.statefulSet
}

func (t *target) template() *corev1.PodTemplateSpec {
	if t.deployment != nil {
		return &t.deployment.Spec.Template
	}
	return &t.statefulSet.Spec.Template
}

func (t *target) selector() *metav1.LabelSelector {
	if t.deployment != nil {
		return t.deployment.Spec.Selector
	}
	return t.statefulSet.Spec.Selector
}

// loadTargets reads the migration's workloads. Targets named in the spec
// that do not exist are returned by name, so the status can say which.
func (r *PlacementMigrationReconciler) loadTargets(ctx context.Context, pm *pgv1.PlacementMigration) ([]*target, []string, error) {
	refs, err := r.targetRefs(ctx, pm)
	if err != nil {
		return nil, nil, err
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(pm.Namespace)); err != nil {
		return nil, nil, fmt.Errorf("list pods in %s: %w", pm.Namespace, err)
	}
	livePods := make([]*corev1.Pod, 0, len(pods.Items))
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil {
			livePods = append(livePods, &pods.Items[i])
		}
	}
	var replicaSets []*appsv1.ReplicaSet
	var out []*target
	var missing []string
	for _, ref := range refs {
		key := client.ObjectKey{Namespace: pm.Namespace, Name: ref.Name}
		t := &target{ref: ref}
		switch ref.Kind {
		case pgv1.KindDeployment:
			d := &appsv1.Deployment{}
			if err := r.Get(ctx, key, d); err != nil {
				if apierrors.IsNotFound(err) {
					missing = append(missing, string(ref.Kind)+"/"+ref.Name)
					continue
				}
				return nil, nil, fmt.Errorf("get Deployment %s: %w", key, err)
			}
			if replicaSets == nil {
				if replicaSets, err = r.replicaSets(ctx, pm.Namespace); err != nil {
					return nil, nil, err
				}
			}
			t.deployment = d
			t.workload = targets.FromDeployment(d, replicaSets, livePods)
		case pgv1.KindStatefulSet:
			s := &appsv1.StatefulSet{}
			if err := r.Get(ctx, key, s); err != nil {
				if apierrors.IsNotFound(err) {
					missing = append(missing, string(ref.Kind)+"/"+ref.Name)
					continue
				}
				return nil, nil, fmt.Errorf("get StatefulSet %s: %w", key, err)
			}
			t.statefulSet = s
			t.workload = targets.FromStatefulSet(s, livePods)
		}
		t.pods = podsOf(t.workload, livePods)
		out = append(out, t)
	}
	return out, missing, nil
}

// targetRefs lists the workloads the spec names or selects, in a stable order.
func (r *PlacementMigrationReconciler) targetRefs(ctx context.Context, pm *pgv1.PlacementMigration) ([]pgv1.TargetRef, error) {
	if pm.Spec.TargetSelector == nil {
		return pm.Spec.Targets, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(&pm.Spec.TargetSelector.Selector)
	if err != nil {
		return nil, fmt.Errorf("targetSelector: %w", err)
	}
	kinds := pm.Spec.TargetSelector.Kinds
	if len(kinds) == 0 {
		kinds = []pgv1.WorkloadKind{pgv1.KindDeployment, pgv1.KindStatefulSet}
	}
	var refs []pgv1.TargetRef
	for _, kind := range kinds {
		opts := []client.ListOption{client.InNamespace(pm.Namespace), client.MatchingLabelsSelector{Selector: sel}}
		switch kind {
		case pgv1.KindDeployment:
			var list appsv1.DeploymentList
			if err := r.List(ctx, &list, opts...); err != nil {
				return nil, fmt.Errorf("list Deployments selected by %s: %w", sel, err)
			}
			for _, d := range list.Items {
				refs = append(refs, pgv1.TargetRef{Kind: kind, Name: d.Name})
			}
		case pgv1.KindStatefulSet:
			var list appsv1.StatefulSetList
			if err := r.List(ctx, &list, opts...); err != nil {
				return nil, fmt.Errorf("list StatefulSets selected by %s: %w", sel, err)
			}
			for _, s := range list.Items {
				refs = append(refs, pgv1.TargetRef{Kind: kind, Name: s.Name})
			}
		}
	}
	sort.Slice(refs, func(i, j int) bool {
		return strings.Compare(string(refs[i].Kind)+"/"+refs[i].Name, string(refs[j].Kind)+"/"+refs[j].Name) < 0
	})
	return refs, nil
}

func (r *PlacementMigrationReconciler) replicaSets(ctx context.Context, namespace string) ([]*appsv1.ReplicaSet, error) {
	var list appsv1.ReplicaSetList
	if err := r.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list ReplicaSets in %s: %w", namespace, err)
	}
	out := make([]*appsv1.ReplicaSet, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// podsOf returns the live pods of a workload, by name.
func podsOf(w *placement.Workload, pods []*corev1.Pod) []*corev1.Pod {
	mine := map[string]bool{}
	for _, uid := range w.Pods {
		mine[string(uid)] = true
	}
	var out []*corev1.Pod
	for _, p := range pods {
		if mine[string(p.UID)] {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
