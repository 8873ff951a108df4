// Package controller holds the reconcilers of placement-guard. They read the
// cluster, ask the domain packages what to do, act and record; the judgement
// itself lives in those packages.
package controller

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/metrics"
	"github.com/placement-guard/placement-guard/internal/workloadpatch"
)

// FieldManager is the server-side apply field manager of everything the
// operator writes.
const FieldManager = workloadpatch.FieldManager

// DefaultUnschedulableGrace is how long a target pod may stay Pending
// because of our constraint before its stage is rolled back.
const DefaultUnschedulableGrace = 30 * time.Second

// PlacementMigrationReconciler drives PlacementMigrations through their
// stages. It reads workloads and pods from the manager's cache and asks the
// placement engine, kept current by State, every question about scheduling.
type PlacementMigrationReconciler struct {
	client.Client
	// APIReader reads what the cache strips: the managed fields that name
	// the writer who removed a constraint.
	APIReader client.Reader
	Scheme    *runtime.Scheme
	State     *ClusterState
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	// UnschedulableGrace is how long a target pod may stay Pending because
	// of our constraint before the stage is rolled back.
	UnschedulableGrace time.Duration
}

// +kubebuilder:rbac:groups=placementguard.io,resources=placementmigrations,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=placementguard.io,resources=placementmigrations/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=placementguard.io,resources=placementmigrations/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=apps,resources=replicasets;controllerrevisions,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods;nodes;namespaces;persistentvolumeclaims;persistentvolumes,verbs=get;list;watch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile reads the migration and its targets, decides the next step of
// the state machine, acts, and records the outcome in status and events.
func (r *PlacementMigrationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// The migration is read from the API server, not the cache: its status
	// is the record of what was applied, and acting on a stale record could
	// apply a stage twice or skip one.
	pm := &pgv1.PlacementMigration{}
	if err := r.APIReader.Get(ctx, req.NamespacedName, pm); err != nil {
		if apierrors.IsNotFound(err) {
			metrics.Forget(req.Namespace, req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get PlacementMigration %s: %w", req.NamespacedName, err)
	}
	if !pm.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, pm)
	}
	if err := r.syncFinalizer(ctx, pm); err != nil {
		return ctrl.Result{}, err
	}
	before := pm.DeepCopy()
	m := &migration{r: r, pm: pm, now: r.Clock.Now()}
	o, err := m.step(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	summarize(pm, o)
	if !equality.Semantic.DeepEqual(before.Status, pm.Status) {
		// No optimistic lock: this reconciler is the status' only writer and
		// read the object fresh, and a conflict with an edit of metadata
		// must not lose the record of a stage just applied or rolled back.
		if err := r.Status().Patch(ctx, pm, client.MergeFrom(before)); err != nil {
			return ctrl.Result{}, fmt.Errorf("record status of PlacementMigration %s: %w", req.NamespacedName, err)
		}
	}
	r.announce(before, pm, o)
	metrics.RecordPhase(pm.Namespace, pm.Name, string(pm.Status.Phase))
	if c := pm.Status.Capacity; c != nil {
		metrics.RecordCapacity(pm.Namespace, pm.Name, int(c.QualifyingNodes), int(c.RequiredNodes))
	}
	return ctrl.Result{RequeueAfter: o.after}, nil
}

// announce emits an Event for every change of phase or of the reason the
// migration gives, so `kubectl describe` tells the story in order.
func (r *PlacementMigrationReconciler) announce(before, after *pgv1.PlacementMigration, o outcome) {
	if r.Recorder == nil {
		return
	}
	old := meta.FindStatusCondition(before.Status.Conditions, pgv1.ConditionReady)
	if before.Status.Phase != after.Status.Phase || old == nil || old.Reason != o.reason || old.Message != o.message {
		kind := corev1.EventTypeNormal
		if stalledPhases[o.phase] {
			kind = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(after, nil, kind, o.reason, string(o.phase), "%s", truncate(o.message, 1000))
	}
	for _, e := range o.events {
		r.Recorder.Eventf(after, nil, e.kind, e.reason, string(o.phase), "%s", truncate(e.message, 1000))
	}
}

// syncFinalizer keeps the revert finalizer exactly on migrations whose
// onDelete is Revert.
func (r *PlacementMigrationReconciler) syncFinalizer(ctx context.Context, pm *pgv1.PlacementMigration) error {
	want := pm.Spec.OnDelete == pgv1.DeletionRevert
	if want == controllerutil.ContainsFinalizer(pm, pgv1.RevertFinalizer) {
		return nil
	}
	patch := client.MergeFrom(pm.DeepCopy())
	if want {
		controllerutil.AddFinalizer(pm, pgv1.RevertFinalizer)
	} else {
		controllerutil.RemoveFinalizer(pm, pgv1.RevertFinalizer)
	}
	if err := r.Patch(ctx, pm, patch); err != nil {
		return fmt.Errorf("update finalizer of PlacementMigration %s/%s: %w", pm.Namespace, pm.Name, err)
	}
	return nil
}

// finalize restores, for onDelete: Revert, what the targets had before the
// migration: releasing every field we own gives back the template as found.
func (r *PlacementMigrationReconciler) finalize(ctx context.Context, pm *pgv1.PlacementMigration) error {
	metrics.Forget(pm.Namespace, pm.Name)
	if !controllerutil.ContainsFinalizer(pm, pgv1.RevertFinalizer) {
		return nil
	}
	ts, _, err := r.loadTargets(ctx, pm)
	if err != nil {
		return err
	}
	m := &migration{r: r, pm: pm, now: r.Clock.Now()}
	for _, t := range ts {
		if err := m.apply(ctx, t, pgv1.StageNone, false); err != nil {
			return fmt.Errorf("revert %s before deleting PlacementMigration %s/%s: %w", t, pm.Namespace, pm.Name, err)
		}
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(pm, nil, corev1.EventTypeNormal, "Reverted", "Delete", "Removed the constraint from %d workload(s) (onDelete: Revert)", len(ts))
	}
	patch := client.MergeFrom(pm.DeepCopy())
	controllerutil.RemoveFinalizer(pm, pgv1.RevertFinalizer)
	if err := r.Patch(ctx, pm, patch); err != nil {
		return fmt.Errorf("remove finalizer of PlacementMigration %s/%s: %w", pm.Namespace, pm.Name, err)
	}
	return nil
}

// SetupWithManager registers the reconciler and its watches: migrations,
// their workloads, and, through State, every pod, node and storage object
// the engine reads, each mapped to the migrations it may concern.
func (r *PlacementMigrationReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.UnschedulableGrace == 0 {
		r.UnschedulableGrace = DefaultUnschedulableGrace
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.State == nil {
		r.State = NewClusterState()
	}
	if err := r.State.Watch(context.Background(), mgr.GetCache()); err != nil {
		return err
	}
	inNamespace := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return r.migrationsIn(ctx, o.GetNamespace())
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&pgv1.PlacementMigration{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, deletionPredicate()))).
		Watches(&appsv1.Deployment{}, inNamespace).
		Watches(&appsv1.StatefulSet{}, inNamespace).
		WatchesRawSource(source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			r.State.Notify(func(namespace string) {
				for _, req := range r.migrationsIn(ctx, namespace) {
					q.Add(req)
				}
			})
			return nil
		})).
		Named("placementmigration").
		Complete(r)
}

// deletionPredicate passes updates that start a deletion, which change
// neither generation nor annotations.
func deletionPredicate() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return !e.ObjectNew.GetDeletionTimestamp().IsZero()
	}}
}

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
