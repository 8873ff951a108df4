package controller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/planning"
	"github.com/placement-guard/placement-guard/internal/targets"
)

// loadTargets reads the workloads, their ReplicaSets and pods, through
// the cache's controller index: what a reconcile reads grows with its
// targets, not with the namespace.
func (s *scope) loadTargets(ctx context.Context, refs []pgv1.TargetRef) error {
	for _, ref := range refs {
		t, err := s.loadWorkload(ctx, ref)
		if err != nil {
			return err
		}
		if t == nil {
			s.missing = append(s.missing, ref)
			continue
		}
		s.targets = append(s.targets, &target{&planning.Target{Target: t, Ref: ref}})
	}
	found := make([]*planning.Target, len(s.targets))
	for i, t := range s.targets {
		found[i] = t.Target
	}
	planning.Render(found, s.constraint)
	planning.KeepRecordedRenderings(s.pm, found, s.constraint)
	return nil
}

// loadWorkload reads one workload, its ReplicaSets and pods from the
// cache; nil when it does not exist.
func (s *scope) loadWorkload(ctx context.Context, ref pgv1.TargetRef) (*targets.Target, error) {
	obj, err := targets.NewObject(string(ref.Kind))
	if err != nil {
		return nil, err
	}
	key := client.ObjectKey{Namespace: s.pm.Namespace, Name: ref.Name}
	if err := s.r.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get %s %s: %w", ref.Kind, key, err)
	}
	return s.r.State.Live(ctx, s.r.Client, obj)
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
	opts := []client.ListOption{client.InNamespace(pm.Namespace), client.MatchingLabelsSelector{Selector: sel}}
	var workloads []client.Object
	for _, k := range targets.Kinds() {
		list := k.NewList()
		if err := r.List(ctx, list, opts...); err != nil {
			return nil, fmt.Errorf("list %s selected by %s: %w", k.Resource, sel, err)
		}
		workloads = append(workloads, k.Items(list)...)
	}
	return planning.TargetRefs(pm.Spec, workloads)
}
