// Package findings records the admission check's findings as Events on
// the workload once a change lands: the webhook has no side effects, so
// its findings reach `kubectl describe`, dashboards and alerting here.
package findings

import (
	"context"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/admission"
	"github.com/placement-guard/placement-guard/internal/clusterview"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
	"github.com/placement-guard/placement-guard/internal/targets"
)

// Reconciler records the admission check's findings as Events on
// the workload once a change lands. Helm drops admission warnings, Argo CD
// and Flux only log them; an Event is what `kubectl describe`, dashboards
// and alerting see. The webhook itself has no side effects: this
// controller judges the change again, on the leader, from the same
// snapshot, and records each finding once per generation of the workload:
// the generation is in the Event's note, and a finding a leader before
// this one recorded (the Events of the workload, read from the API server
// on a generation this leader has not judged) is not recorded again.
type Reconciler struct {
	client.Client
	// Events reads the workload's Events from the API server, uncached:
	// what was said before this leader started.
	Events   client.Reader
	Recorder events.EventRecorder
	Cluster  clusterview.View
	// Skip are namespaces never judged, as the admission check skips them.
	Skip []string

	mu sync.Mutex
	// told remembers, per workload, the generation last judged.
	told map[types.UID]int64
}

// Reconcile judges a workload whose placement-relevant fields changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	workloads, err := targets.Named(ctx, r.Client, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, err
	}
	for _, obj := range workloads {
		if err := r.record(ctx, obj); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// record judges obj once per generation and tells each finding.
func (r *Reconciler) record(ctx context.Context, obj client.Object) error {
	if slices.Contains(r.Skip, obj.GetNamespace()) || obj.GetLabels()[pgv1.AdmissionLabel] == "Off" {
		return nil
	}
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, client.ObjectKey{Name: obj.GetNamespace()}, ns); err == nil && ns.Labels[pgv1.AdmissionLabel] == "Off" {
		return nil
	}
	if !r.firstTime(obj) {
		return nil
	}
	migrations, err := r.Cluster.Migrations(ctx, obj.GetNamespace())
	if err != nil || migrated(migrations, obj) {
		return err
	}
	t, err := r.Cluster.Live(ctx, obj)
	if err != nil {
		return err
	}
	policies, err := r.Cluster.Policies(ctx, obj.GetNamespace())
	if err != nil {
		return err
	}
	// The change has landed and what it replaced is gone: every hard
	// constraint is judged as the workload's own. Off the request's path,
	// the pre-flight is asked too.
	ch := planning.Change{Target: t, Migrations: migrations, Policies: policies, Preflight: true}
	var findings []admission.Finding
	err = r.Cluster.With(ctx, func(snap *placement.Snapshot) error {
		var err error
		findings, err = admission.Judge(snap, ch)
		return err
	})
	if err != nil {
		return fmt.Errorf("judge %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	if len(findings) == 0 {
		return nil
	}
	said, err := r.said(ctx, obj)
	if err != nil {
		r.forget(obj)
		return err
	}
	for _, f := range findings {
		kind := corev1.EventTypeNormal
		if f.Blocking {
			kind = corev1.EventTypeWarning
		}
		note := noteOf(f, obj.GetGeneration())
		if said[f.Type+"\x00"+note] {
			continue
		}
		r.Recorder.Eventf(obj, nil, kind, f.Type, findingAction, "%s", note)
	}
	return nil
}

// findingAction is the action of a finding's Event.
const findingAction = "Judged"

// noteOf is the note of a finding's Event: the finding, and the
// generation of the workload it was found of, which tells one change's
// findings from the next one's.
func noteOf(f admission.Finding, generation int64) string {
	return fmt.Sprintf("%s (generation %d)", f.Message, generation)
}

// said are the findings recorded of the workload already, by reason and
// note, from its Events as the API server has them.
func (r *Reconciler) said(ctx context.Context, obj client.Object) (map[string]bool, error) {
	var list corev1.EventList
	if err := r.Events.List(ctx, &list, client.InNamespace(obj.GetNamespace()),
		client.MatchingFields{"involvedObject.uid": string(obj.GetUID())}); err != nil {
		return nil, fmt.Errorf("read the Events of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	out := map[string]bool{}
	for _, e := range list.Items {
		if e.Action == findingAction {
			out[e.Reason+"\x00"+e.Message] = true
		}
	}
	return out, nil
}

// forget lets the workload's generation be judged again, after a failure.
func (r *Reconciler) forget(obj client.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.told, obj.GetUID())
}

// firstTime reports whether the workload's generation was not judged yet,
// and remembers it.
func (r *Reconciler) firstTime(obj client.Object) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.told == nil {
		r.told = map[types.UID]int64{}
	}
	if r.told[obj.GetUID()] >= obj.GetGeneration() {
		return false
	}
	r.told[obj.GetUID()] = obj.GetGeneration()
	return true
}

// migrated reports a workload one of the namespace's migrations targets:
// the migration judges it, and says so in its own status.
func migrated(migrations []pgv1.PlacementMigration, obj client.Object) bool {
	ref := pgv1.TargetRef{Kind: pgv1.WorkloadKind(objectKind(obj)), Name: obj.GetName()}
	for i := range migrations {
		pm := &migrations[i]
		if planning.Holds(pm, ref) {
			return true
		}
		for _, t := range pm.Spec.Targets {
			if t == ref {
				return true
			}
		}
		for _, ts := range pm.Status.Targets {
			if ts.Kind == ref.Kind && ts.Name == ref.Name {
				return true
			}
		}
	}
	return false
}

// objectKind is the workload kind of an object the cache returned.
func objectKind(obj client.Object) string {
	if w := targets.WorkloadOf(obj); w != nil {
		return string(w.Kind)
	}
	return ""
}

// +kubebuilder:rbac:groups="",resources=events,verbs=list

// SetupWithManager watches the workloads whose change the admission check
// would judge: a create carrying a hard constraint, an update that changes
// one, or the replicas or strategy beside one.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	relevant := predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return admission.Relevant(nil, targets.WorkloadOf(e.Object)) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return admission.Relevant(targets.WorkloadOf(e.ObjectOld), targets.WorkloadOf(e.ObjectNew))
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	b := ctrl.NewControllerManagedBy(mgr).Named("admissionfindings")
	for _, k := range targets.Kinds() {
		b = b.Watches(k.New(), &handler.EnqueueRequestForObject{}, builder.WithPredicates(relevant))
	}
	return b.Complete(r)
}
