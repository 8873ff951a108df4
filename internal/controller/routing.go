package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// concernedBy lists the migrations a change the engine took in concerns,
// those to look at now and those that may wait: a pod's reaches the
// migrations whose interest admits it, any other namespaced object's every
// migration of its namespace, and a cluster-scoped object's (a node, a
// volume) every migration, the settled ones a little later, so that one
// waiting for that node is not queued behind every settled one.
func (r *PlacementMigrationReconciler) concernedBy(ctx context.Context, before, after client.Object) (now, later []reconcile.Request) {
	if _, ok := after.(*corev1.Pod); ok && after.GetNamespace() != "" {
		var old map[string]string
		if before != nil {
			old = before.GetLabels()
		}
		return r.interests.podChange(after.GetNamespace(), old, after.GetLabels()), nil
	}
	namespace := after.GetNamespace()
	if _, ok := after.(*storagev1.CSIStorageCapacity); ok {
		// A driver publishes its capacity in its own namespace; it decides
		// where claims of every namespace can be provisioned.
		namespace = ""
	}
	all := r.migrationsIn(ctx, namespace)
	if namespace != "" {
		return all, nil
	}
	for _, req := range all {
		if r.interests.settled(req.NamespacedName) {
			later = append(later, req)
		} else {
			now = append(now, req)
		}
	}
	return now, later
}

// settledDelay is how long a settled migration waits to look at a
// cluster-wide change, behind the migrations at work.
const settledDelay = time.Second

// migrationsIn lists the migrations a change in namespace may concern; a
// cluster-scoped change ("") concerns them all.
func (r *PlacementMigrationReconciler) migrationsIn(ctx context.Context, namespace string) []reconcile.Request {
	var list pgv1.PlacementMigrationList
	var opts []client.ListOption
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	if err := r.List(ctx, &list, opts...); err != nil {
		logf.FromContext(ctx).Error(err, "Listing PlacementMigrations to requeue", "namespace", namespace)
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, pm := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pm)})
	}
	return out
}
