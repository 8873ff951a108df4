package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
			s.missing = append(s.missing, string(ref.Kind)+"/"+ref.Name)
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
	return s.r.live(ctx, obj)
}

// live is the Target of a workload object with what it controls now: its
// ReplicaSets from the cache's controller index, and the pods of it or of
// them from the engine's records. An object not created yet has none.
func (r *PlacementMigrationReconciler) live(ctx context.Context, obj client.Object) (*targets.Target, error) {
	var replicaSets []*appsv1.ReplicaSet
	owners := []types.UID{}
	if uid := obj.GetUID(); uid != "" {
		var err error
		if replicaSets, err = r.ownedReplicaSets(ctx, obj); err != nil {
			return nil, err
		}
		owners = append(uidsOf(replicaSets), uid)
	}
	t := targets.Build(obj, replicaSets, r.State.PodsControlledBy(obj.GetNamespace(), owners...))
	if t == nil {
		return nil, fmt.Errorf("%T is not a workload placement-guard migrates", obj)
	}
	return t, nil
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

func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}
