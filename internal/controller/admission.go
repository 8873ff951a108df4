package controller

import (
	"context"
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
	"github.com/placement-guard/placement-guard/internal/targets"
)

// AdmissionCluster is what the admission check reads of the cluster: the
// engine's snapshot, which the feeds keep warm on every replica, leader or
// not, a workload with what it runs now, and what a change is judged with.
type AdmissionCluster struct{ r *PlacementMigrationReconciler }

// AdmissionCluster gives the admission check the reconciler's view of the
// cluster; SetupWithManager must have run.
func (r *PlacementMigrationReconciler) AdmissionCluster() AdmissionCluster {
	return AdmissionCluster{r: r}
}

// With runs f with the snapshot held still.
func (c AdmissionCluster) With(f func(*placement.Snapshot) error) error {
	return c.r.State.With(f)
}

// Live is obj as a target, with the pods and revision the object of its
// uid runs now: none for a create.
func (c AdmissionCluster) Live(ctx context.Context, obj client.Object) (*targets.Target, error) {
	return c.r.live(ctx, obj)
}

// Migrations are the namespace's PlacementMigrations, from the manager's
// cache: one may write the field a change writes, or be judged with it.
func (c AdmissionCluster) Migrations(ctx context.Context, namespace string) ([]pgv1.PlacementMigration, error) {
	var migrations pgv1.PlacementMigrationList
	if err := c.r.List(ctx, &migrations, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list PlacementMigrations in %s: %w", namespace, err)
	}
	return migrations.Items, nil
}

// Workload is a workload of the kind from the manager's cache: what a
// write to its scale subresource changes.
func (c AdmissionCluster) Workload(ctx context.Context, kind *targets.Kind, namespace, name string) (client.Object, error) {
	obj := kind.New()
	if err := c.r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
		return nil, fmt.Errorf("read %s %s/%s: %w", kind.Name, namespace, name, err)
	}
	return obj, nil
}

// Policies are the namespace's PodDisruptionBudgets and
// HorizontalPodAutoscalers, from the manager's cache: the pre-flight's.
func (c AdmissionCluster) Policies(ctx context.Context, namespace string) (planning.Policies, error) {
	return policiesIn(ctx, c.r.Client, namespace)
}

// Warm asks the manager's cache for what Migrations and Policies read before the
// manager starts, so that every replica, leader or not, keeps it warm
// from its start instead of listing it on the first change it judges.
func (c AdmissionCluster) Warm(ctx context.Context, informers cache.Informers) error {
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
func (c AdmissionCluster) Synced() bool { return c.r.Feeds.HasSynced() }
