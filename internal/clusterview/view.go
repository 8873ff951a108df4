// Package clusterview is what the admission check and the Events of its
// findings read of the cluster: the engine's snapshot and a workload as
// it runs now (clusterstate), and, from the manager's cache, the
// namespace's PlacementMigrations, disruption budgets and autoscalers and
// a workload by name. cmd builds it from the cluster state, on every
// replica, leader or not; it writes nothing and decides nothing.
package clusterview

import (
	"context"
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/clusterstate"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
	"github.com/placement-guard/placement-guard/internal/targets"
)

// View reads the cluster for the admission check.
type View struct {
	// Reader is the manager's cache.
	Reader client.Reader
	// State and Feeds are the engine's view of the cluster
	// (clusterstate.Setup).
	State *clusterstate.ClusterState
	Feeds clusterstate.Feeds
}

// With runs f with the snapshot held still; what f asks stops when ctx
// ends (clusterstate.ClusterState.With).
func (v View) With(ctx context.Context, f func(*placement.Snapshot) error) error {
	return v.State.With(ctx, f)
}

// Live is obj as a target, with the pods and revision the object of its
// uid runs now: none for a create.
func (v View) Live(ctx context.Context, obj client.Object) (*targets.Target, error) {
	return v.State.Live(ctx, v.Reader, obj)
}

// Migrations are the namespace's PlacementMigrations: one may write the
// field a change writes, or be judged with it.
func (v View) Migrations(ctx context.Context, namespace string) ([]pgv1.PlacementMigration, error) {
	var migrations pgv1.PlacementMigrationList
	if err := v.Reader.List(ctx, &migrations, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list PlacementMigrations in %s: %w", namespace, err)
	}
	return migrations.Items, nil
}

// Workload is a workload of the kind: what a write to its scale
// subresource changes.
func (v View) Workload(ctx context.Context, kind *targets.Kind, namespace, name string) (client.Object, error) {
	obj := kind.New()
	if err := v.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
		return nil, fmt.Errorf("read %s %s/%s: %w", kind.Name, namespace, name, err)
	}
	return obj, nil
}

// Policies are the namespace's PodDisruptionBudgets and
// HorizontalPodAutoscalers: the pre-flight's.
func (v View) Policies(ctx context.Context, namespace string) (planning.Policies, error) {
	return Policies(ctx, v.Reader, namespace)
}

// Policies are the namespace's PodDisruptionBudgets and
// HorizontalPodAutoscalers as c holds them: what the pre-flight judges
// drains and scale-outs with.
func Policies(ctx context.Context, c client.Reader, namespace string) (planning.Policies, error) {
	var budgets policyv1.PodDisruptionBudgetList
	if err := c.List(ctx, &budgets, client.InNamespace(namespace)); err != nil {
		return planning.Policies{}, fmt.Errorf("list PodDisruptionBudgets in %s: %w", namespace, err)
	}
	var autoscalers autoscalingv2.HorizontalPodAutoscalerList
	if err := c.List(ctx, &autoscalers, client.InNamespace(namespace)); err != nil {
		return planning.Policies{}, fmt.Errorf("list HorizontalPodAutoscalers in %s: %w", namespace, err)
	}
	return planning.Policies{Budgets: budgets.Items, Autoscalers: autoscalers.Items}, nil
}

// Warm asks the manager's cache for what Migrations and Policies read
// before the manager starts, so that every replica, leader or not, keeps
// it warm from its start instead of listing it on the first change it
// judges.
func (v View) Warm(ctx context.Context, informers cache.Informers) error {
	for _, obj := range []client.Object{&pgv1.PlacementMigration{}, &policyv1.PodDisruptionBudget{}, &autoscalingv2.HorizontalPodAutoscaler{}} {
		if _, err := informers.GetInformer(ctx, obj, cache.BlockUntilSynced(false)); err != nil {
			return fmt.Errorf("watch %T for the admission check: %w", obj, err)
		}
	}
	return nil
}

// Synced reports whether the feeds have taken in their first list: until
// then the snapshot does not know the cluster, and a replica must not
// judge (readiness waits for it).
func (v View) Synced() bool { return v.Feeds.HasSynced() }
