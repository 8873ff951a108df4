package controller

import (
	"context"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/targets"
)

// loadTargets reads the workloads, their ReplicaSets and pods.
func (s *scope) loadTargets(ctx context.Context, refs []pgv1.TargetRef) error {
	r, ns := s.r, s.pm.Namespace
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("list pods in %s: %w", ns, err)
	}
	live := make([]*corev1.Pod, 0, len(pods.Items))
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil {
			live = append(live, &pods.Items[i])
		}
	}
	var replicaSets []*appsv1.ReplicaSet
	for _, ref := range refs {
		key := client.ObjectKey{Namespace: ns, Name: ref.Name}
		var t *targets.Target
		switch ref.Kind {
		case pgv1.KindDeployment:
			d := &appsv1.Deployment{}
			if err := r.Get(ctx, key, d); err != nil {
				if apierrors.IsNotFound(err) {
					s.missing = append(s.missing, string(ref.Kind)+"/"+ref.Name)
					continue
				}
				return fmt.Errorf("get Deployment %s: %w", key, err)
			}
			if replicaSets == nil {
				var err error
				if replicaSets, err = r.replicaSets(ctx, ns); err != nil {
					return err
				}
			}
			t = targets.NewDeployment(d, replicaSets, live)
		case pgv1.KindStatefulSet:
			st := &appsv1.StatefulSet{}
			if err := r.Get(ctx, key, st); err != nil {
				if apierrors.IsNotFound(err) {
					s.missing = append(s.missing, string(ref.Kind)+"/"+ref.Name)
					continue
				}
				return fmt.Errorf("get StatefulSet %s: %w", key, err)
			}
			t = targets.NewStatefulSet(st, live)
		}
		s.targets = append(s.targets, &target{Target: t, ref: ref})
	}
	all := make([]*placement.Workload, len(s.targets))
	for i, t := range s.targets {
		all[i] = t.Workload
	}
	for _, t := range s.targets {
		t.rendered = s.constraint.RenderFor(t.Workload, all)
	}
	return nil
}

// targetRefs lists the workloads the spec names or selects, in a stable order.
func (r *PlacementMigrationReconciler) targetRefs(ctx context.Context, pm *pgv1.PlacementMigration) ([]pgv1.TargetRef, error) {
	if pm.Spec.TargetSelector == nil {
		return pm.Spec.Targets, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(pm.Spec.TargetSelector.Selector.AsMeta())
	if err != nil {
		return nil, fmt.Errorf("targetSelector: %w", err)
	}
	kinds := pm.Spec.TargetSelector.Kinds
	if len(kinds) == 0 {
		kinds = []pgv1.WorkloadKind{pgv1.KindDeployment, pgv1.KindStatefulSet}
	}
	var refs []pgv1.TargetRef
	opts := []client.ListOption{client.InNamespace(pm.Namespace), client.MatchingLabelsSelector{Selector: sel}}
	for _, kind := range kinds {
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
			for _, st := range list.Items {
				refs = append(refs, pgv1.TargetRef{Kind: kind, Name: st.Name})
			}
		}
	}
	sort.Slice(refs, func(i, j int) bool { return refKey(refs[i]) < refKey(refs[j]) })
	return refs, nil
}

func refKey(ref pgv1.TargetRef) string { return string(ref.Kind) + "/" + ref.Name }

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
