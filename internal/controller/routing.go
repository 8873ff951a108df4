package controller

import (
	"context"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// concernedBy lists the migrations a change the engine took in concerns,
// those to look at now and those that may wait: a namespaced object's
// (a claim) every migration of its namespace, and a cluster-scoped
// object's (a node, a volume) every migration, the settled ones a little
// later, so that one waiting for that node is not queued behind every
// settled one. A pod's reaches only the migrations whose interest admits
// it (stateSource).
func (r *PlacementMigrationReconciler) concernedBy(ctx context.Context, obj client.Object) (now, later []reconcile.Request) {
	namespace := obj.GetNamespace()
	if _, ok := obj.(*storagev1.CSIStorageCapacity); ok {
		// A driver publishes its capacity in its own namespace; it decides
		// where claims of every namespace can be provisioned.
		namespace = ""
	}
	all := r.migrationsIn(ctx, namespace)
	if namespace != "" {
		return all, nil
	}
	for _, req := range all {
		if r.router.Settled(req.NamespacedName) {
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

// stateSource tells the controller of every change the engine takes in
// (ClusterState's informers and the pod feed), routed to the migrations it
// concerns. The controller starts its workers only once the feed holds
// every pod: a migration judged on a half-listed cluster would see pods
// missing.
type stateSource struct {
	r *PlacementMigrationReconciler
}

var _ source.TypedSyncingSource[reconcile.Request] = (*stateSource)(nil)

func (s *stateSource) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	s.r.State.Notify(func(obj client.Object) {
		now, later := s.r.concernedBy(ctx, obj)
		for _, req := range now {
			q.Add(req)
		}
		addLater(q, later)
	})
	s.r.State.NotifyPods(func(namespace string, before, after map[string]string) {
		for _, key := range s.r.router.PodChange(namespace, before, after) {
			q.Add(reconcile.Request{NamespacedName: key})
		}
	})
	return nil
}

// addLater queues settled migrations settledDelay from now, and behind
// every migration at work: when their delay ends they must not take the
// worker from a migration whose node has just come, which a queue in
// arrival order would make wait for every settled one (a node's change
// concerns them all).
func addLater(q workqueue.TypedRateLimitingInterface[reconcile.Request], reqs []reconcile.Request) {
	if len(reqs) == 0 {
		return
	}
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		pq.AddWithOpts(priorityqueue.AddOpts{After: settledDelay, Priority: ptr.To(handler.LowPriority)}, reqs...)
		return
	}
	for _, req := range reqs {
		q.AddAfter(req, settledDelay)
	}
}

func (s *stateSource) WaitForSync(ctx context.Context) error { return s.r.Feeds.WaitForSync(ctx) }

func (s *stateSource) String() string { return "placement-guard cluster state" }

// requests are the migrations' reconcile requests.
func requests(keys []types.NamespacedName) []reconcile.Request {
	out := make([]reconcile.Request, len(keys))
	for i, k := range keys {
		out[i] = reconcile.Request{NamespacedName: k}
	}
	return out
}

// freshPodsIn is how long a migration about to act on its pods and nodes
// waits for the feeds to catch up (clusterstate.Router.GoingToWork). A
// settled migration judges at once: what woke it has reached the engine,
// and what comes after wakes it again.
func (r *PlacementMigrationReconciler) freshPodsIn(key types.NamespacedName, pm *pgv1.PlacementMigration) time.Duration {
	if settled(pm) {
		return 0
	}
	return r.router.GoingToWork(key)
}
