// Package controller holds the PlacementMigration reconciler; the other
// reconcilers have a package each beneath it (adopt, findings,
// namespacemode, rebalance) and setup wires them into a manager. They read
// the cluster, ask the domain packages what to do, act and record; the
// judgement itself lives in those packages (planning asks the engine the
// one question), and the engine's view of the cluster in
// internal/clusterstate.
// No controller here switches on a workload's kind (internal/targets knows
// the kinds; make verify holds it).
package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/brief"
	"github.com/placement-guard/placement-guard/internal/clusterstate"
	"github.com/placement-guard/placement-guard/internal/metrics"
	"github.com/placement-guard/placement-guard/internal/planning"
	"github.com/placement-guard/placement-guard/internal/targets"
)

// DefaultUnschedulableGrace is how long a target pod may stay Pending
// because of our constraint before its stage is rolled back, and for a
// cause outside the migration before it stops (planning's, which plan
// observes with).
const DefaultUnschedulableGrace = planning.DefaultUnschedulableGrace

// PlacementMigrationReconciler drives PlacementMigrations through their
// stages. It reads migrations, workloads and pods from the manager's cache
// and asks the placement engine, kept current by State, every question
// about scheduling.
type PlacementMigrationReconciler struct {
	client.Client
	// APIReader reads what the cache strips or may not have yet: the
	// managed fields that name the writer who removed a constraint, and the
	// migration's current resourceVersion before a write to a workload.
	APIReader client.Reader
	Scheme    *runtime.Scheme
	// State is the engine's view of the cluster and Feeds bring its pods
	// and nodes (clusterstate.Setup); SetupWithManager sets both up when
	// State is nil.
	State    *clusterstate.ClusterState
	Feeds    clusterstate.Feeds
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	// UnschedulableGrace is how long a target pod may stay Pending because
	// of our constraint before the stage is rolled back.
	UnschedulableGrace time.Duration
	// Budget bounds the writes to any workload.
	Budget *WriteBudget
	// FeedReadInterval paces the reads of the pod and node feeds while
	// every migration is settled (clusterstate.DefaultFeedReadInterval)
	// when SetupWithManager sets them up:
	// their events reach the engine up to this late, for a fraction of the
	// CPU that pod churn and node heartbeats cost. Zero reads each event
	// as it arrives.
	FeedReadInterval time.Duration

	inflight registry
	// disruptions remembers each migration's last disruption verdict and
	// what it was computed from.
	disruptions verdictMemo
	// baselines remember the nodes there were when each migration's
	// capacity request was recorded.
	baselines requestBaselines
	// router maps a change to the migrations it can affect, and keeps
	// the feeds up with events while a migration is at work.
	router clusterstate.Router
	// own are the versions of each migration its own writes replaced.
	own ownWrites
	// pace holds back a status write of progress messages alone.
	pace statusPace
	// stale counts each migration's decisions in a row that went stale.
	stale staleDecisions
}

// +kubebuilder:rbac:groups=placementguard.io,resources=placementmigrations,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=placementguard.io,resources=placementmigrations/status,verbs=get;patch
// +kubebuilder:rbac:groups=placementguard.io,resources=placementmigrations/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=apps,resources=replicasets,verbs=get;list;watch
// Capacity requests (spec.capacity.provision): a PodTemplate with a
// CapacityBuffer, created and deleted by the migration. Neither runs a pod.
// The placeholder Deployments of mode PlaceholderPods need the right to
// create Deployments, which is the right to run any pod: that is the
// opt-in ClusterRole in config/rbac/placeholders_role.yaml, bound only in
// the namespaces that use it.
// +kubebuilder:rbac:groups="",resources=podtemplates,verbs=get;create;delete
// +kubebuilder:rbac:groups=autoscaling.x-k8s.io,resources=capacitybuffers,verbs=get;create;patch;delete
// +kubebuilder:rbac:groups="",resources=pods;nodes;namespaces;persistentvolumeclaims;persistentvolumes,verbs=get;list;watch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses;csinodes;volumeattachments;csidrivers;csistoragecapacities,verbs=get;list;watch
// The Services and ReplicationControllers that select pods, which spread
// by them under the scheduler's system default constraints.
// +kubebuilder:rbac:groups="",resources=services;replicationcontrollers,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile reads the migration and its targets, takes the one step the
// migration needs next, and records the outcome: status is patched at the
// end of the step, with an optimistic lock, and only when it changed. A
// step that recorded the intent of a write is followed, in the same
// reconcile, by the step that makes it.
func (r *PlacementMigrationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	pm := &pgv1.PlacementMigration{}
	if err := r.Get(ctx, req.NamespacedName, pm); err != nil {
		if apierrors.IsNotFound(err) {
			metrics.Forget(req.Namespace, req.Name)
			r.disruptions.forget(req.NamespacedName)
			r.router.Forget(req.NamespacedName)
			r.inflight.track(req.Namespace, req.Name, nil)
			r.own.forget(req.NamespacedName)
			r.pace.forget(req.NamespacedName)
			r.baselines.forget(req.NamespacedName)
			r.stale.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get PlacementMigration %s: %w", req.NamespacedName, err)
	}
	if r.own.behind(req.NamespacedName, pm.ResourceVersion) {
		// The cache has not seen this reconciler's last write of the
		// migration yet; that write's event brings it back, and the
		// retry is only a backstop.
		return ctrl.Result{RequeueAfter: staleRetry}, nil
	}
	ctx = logf.IntoContext(ctx, logf.FromContext(ctx).WithValues("migration", klog.KObj(pm)))
	r.router.MarkAtWork(req.NamespacedName)
	if wait := r.freshPodsIn(req.NamespacedName, pm); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	metrics.CountReconcile(req.Namespace, req.Name)
	if err := r.syncFinalizer(ctx, pm); err != nil {
		if errors.Is(err, errStale) {
			return ctrl.Result{RequeueAfter: staleRetry}, nil
		}
		return ctrl.Result{}, err
	}
	res, recorded, err := r.pass(ctx, req, pm, false)
	if err != nil || !recorded {
		return res, err
	}
	// The intent is recorded by a status write made with an optimistic
	// lock, which returned the record as the API server now holds it: the
	// write it names is made now, rather than once the record's own event
	// has come back and a fresh read has proved it current (ensureCurrent).
	res, _, err = r.pass(ctx, req, pm, true)
	return res, err
}

// pass takes the one step migration pm needs next and records its
// outcome; recorded says that it recorded the intent of a write not made
// yet. current says that pm is the record the API server holds, as the
// status write of the pass before returned it.
func (r *PlacementMigrationReconciler) pass(ctx context.Context, req ctrl.Request, pm *pgv1.PlacementMigration, current bool) (_ ctrl.Result, recorded bool, _ error) {
	s, err := r.newScope(ctx, pm)
	if err != nil {
		return ctrl.Result{}, false, err
	}
	s.current = current
	before := pm.DeepCopy()
	o, err := s.step(ctx)
	if err == nil {
		o, err = s.provision(ctx, o)
		if err == nil {
			o, err = s.keepDeletionCosts(ctx, o)
		}
	} else {
		s.keepRequest(s.asked)
	}
	if isStaleDecision(err) {
		n, wait := r.stale.refused(req.NamespacedName)
		if n >= 3 {
			logf.FromContext(ctx).Info("Deciding again later: a workload keeps changing between the decision's read and its dry run",
				"inARow", n, "after", wait, "last", err.Error())
		}
		return ctrl.Result{RequeueAfter: wait}, false, nil
	}
	r.stale.forget(req.NamespacedName)
	if errors.Is(err, errStale) {
		// Our read is behind the API server: look again shortly, without
		// the error backoff meant for failures.
		return ctrl.Result{RequeueAfter: staleRetry}, false, nil
	}
	if err != nil {
		// Keep what the step recorded before it failed (a write made),
		// but not a verdict it did not reach.
		pm.Status.Conditions, pm.Status.Phase, pm.Status.ObservedGeneration = before.Status.Conditions, before.Status.Phase, before.Status.ObservedGeneration
	} else if !o.silent {
		o.health = s.summarize(o)
	}
	held, perr := r.patchStatus(ctx, before, pm, s)
	if perr != nil {
		if apierrors.IsConflict(perr) && err == nil {
			return ctrl.Result{RequeueAfter: staleRetry}, false, nil
		}
		return ctrl.Result{}, false, errors.Join(err, perr)
	}
	if err != nil {
		return ctrl.Result{}, false, err
	}
	r.router.Set(req.NamespacedName, s.interestOf())
	r.announce(before, pm, o, held == 0)
	metrics.RecordPhase(pm.Namespace, pm.Name, string(pm.Status.Phase))
	metrics.RecordPendingPods(pm.Namespace, pm.Name, o.pendingByConstraint, o.pendingOther)
	if c := pm.Status.Capacity; c != nil {
		metrics.RecordCapacity(pm.Namespace, pm.Name, int(c.QualifyingNodes), int(c.RequiredNodes))
	}
	recorded = pm.ResourceVersion != before.ResourceVersion && recordedIntent(before, pm)
	return ctrl.Result{RequeueAfter: planning.Shortest(o.after, s.recheck, held)}, recorded, nil
}

// recordedIntent reports whether after records an operation with writes
// still to make that before did not record.
func recordedIntent(before, after *pgv1.PlacementMigration) bool {
	op := after.Status.Operation
	if op == nil || op.Held() || len(unwritten(op)) == 0 {
		return false
	}
	return before.Status.Operation == nil || !equality.Semantic.DeepEqual(before.Status.Operation, op)
}

// patchStatus writes the status if it changed, with an optimistic lock: a
// migration read from a cache behind its own last write, or written by
// another replica meanwhile, is refused and reconciled again. A change of
// progress messages alone is held while the last write is recent
// (statusPace), unless the pods' view is short for a cause the workload's
// controller names; so are a new migration's first word while its pod
// view catches up and a success while its targets' old pods leave; held
// is how long, and the migration is looked at again then.
func (r *PlacementMigrationReconciler) patchStatus(ctx context.Context, before, pm *pgv1.PlacementMigration, s *scope) (held time.Duration, _ error) {
	if equality.Semantic.DeepEqual(before.Status, pm.Status) || !pm.DeletionTimestamp.IsZero() && len(pm.Finalizers) == 0 {
		return 0, nil
	}
	key, now := client.ObjectKeyFromObject(pm), r.Clock.Now()
	held = max(firstWordWait(&before.Status, s.viewCatchingUp, pm.CreationTimestamp.Time, now),
		r.pace.settleWait(key, &before.Status, &pm.Status, s.settling, now))
	if !s.viewCause {
		held = max(held, r.pace.hold(key, &before.Status, &pm.Status, now))
	}
	if held > 0 {
		return held, nil
	}
	patch := client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
	replaced := pm.ResourceVersion
	if err := r.Status().Patch(ctx, pm, patch); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		return 0, fmt.Errorf("record status of PlacementMigration %s/%s: %w", pm.Namespace, pm.Name, err)
	}
	r.own.wrote(key, replaced, pm.ResourceVersion)
	r.pace.wrote(key, now)
	r.inflight.track(pm.Namespace, pm.Name, pm.Status.Operation)
	return 0, nil
}

// ensureCurrent refuses to act on a migration read from a cache that is
// behind the API server: a write to a workload is made only on the
// current record of the operation.
func (r *PlacementMigrationReconciler) ensureCurrent(ctx context.Context, pm *pgv1.PlacementMigration) error {
	live := &pgv1.PlacementMigration{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(pm), live); err != nil {
		return fmt.Errorf("read PlacementMigration %s/%s before writing: %w", pm.Namespace, pm.Name, err)
	}
	if live.ResourceVersion != pm.ResourceVersion {
		return fmt.Errorf("PlacementMigration %s/%s changed since it was read (resourceVersion %s, read %s): %w",
			pm.Namespace, pm.Name, live.ResourceVersion, pm.ResourceVersion, errStale)
	}
	return nil
}

// errStale is a read the API server has moved past; staleRetry is how soon
// the migration is looked at again, by when the cache has usually caught up.
var errStale = errors.New("reconciling again before writing")

const staleRetry = 200 * time.Millisecond

// announce emits an Event for every change of phase or of the reason the
// migration gives, so `kubectl describe` tells the story in order, and
// nothing while they stay the same.
func (r *PlacementMigrationReconciler) announce(before, after *pgv1.PlacementMigration, o outcome, written bool) {
	if r.Recorder == nil {
		return
	}
	if !written && !onlyProgress(&before.Status, &after.Status) {
		// A status held back for more than its progress is the next
		// pass's to reach again, and to tell once it is written.
		return
	}
	old := meta.FindStatusCondition(before.Status.Conditions, pgv1.ConditionReady)
	if written && !o.silent && (before.Status.Phase != after.Status.Phase || old == nil || old.Reason != o.reason) {
		kind := corev1.EventTypeNormal
		if o.health == stalled {
			kind = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(after, nil, kind, o.reason, string(after.Status.Phase), "%s", brief.Truncate(o.message, 1000))
	}
	for _, e := range o.events {
		r.Recorder.Eventf(after, nil, e.kind, e.reason, string(after.Status.Phase), "%s", brief.Truncate(e.message, 1000))
	}
}

// SetupWithManager registers the reconciler and its watches: migrations
// (every change, including another migration's status, which may free a
// shared target), their workloads, and, through State, every pod, node
// and storage object the engine reads. A change reaches only the
// migrations it can affect (interest.go); a cluster-scoped one (a node, a
// volume, a storage class) reaches every migration.
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
	if r.Budget == nil {
		r.Budget = DefaultWriteBudget()
	}
	if r.State == nil {
		var err error
		if r.State, r.Feeds, err = clusterstate.Setup(mgr, r.FeedReadInterval); err != nil {
			return err
		}
	}
	r.router.Pace(r.Feeds)
	inNamespace := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return r.migrationsIn(ctx, o.GetNamespace())
	})
	// The map functions are called with the object before and after an
	// update, so a workload whose labels leave a targetSelector is seen.
	workload := func(kind pgv1.WorkloadKind) handler.EventHandler {
		return handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return requests(r.router.WorkloadChange(o.GetNamespace(), pgv1.TargetRef{Kind: kind, Name: o.GetName()}, o.GetLabels()))
		})
	}
	autoscaler := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		ref := o.(*autoscalingv2.HorizontalPodAutoscaler).Spec.ScaleTargetRef
		return requests(r.router.WorkloadChange(o.GetNamespace(), pgv1.TargetRef{Kind: pgv1.WorkloadKind(ref.Kind), Name: ref.Name}, nil))
	})
	b := ctrl.NewControllerManagedBy(mgr).
		For(&pgv1.PlacementMigration{}).
		Watches(&pgv1.PlacementMigration{}, inNamespace)
	for _, k := range targets.Kinds() {
		b = b.Watches(k.New(), workload(k.Name))
	}
	return b.
		Watches(&policyv1.PodDisruptionBudget{}, inNamespace).
		Watches(&autoscalingv2.HorizontalPodAutoscaler{}, autoscaler).
		WatchesRawSource(&stateSource{r: r}).
		Named("placementmigration").
		Complete(r)
}
