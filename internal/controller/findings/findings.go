// Package findings records the admission check's findings as Events on
// the workload once a change lands: the webhook has no side effects, so
// its findings reach `kubectl describe`, dashboards and alerting here.
package findings

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

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
// the generation is in the Event's note, and a generation a leader before
// this one judged (the Events of the workload, read from the API server
// the first time this leader meets it) is not judged again.
type Reconciler struct {
	client.Client
	// Events reads the workload's Events from the API server, uncached:
	// what was said before this leader started.
	Events   client.Reader
	Recorder events.EventRecorder
	Cluster  clusterview.View
	// Skip are namespaces never judged, as the admission check skips them.
	Skip []string
	// Budget bounds one judgement (DefaultBudget when 0): the pre-flight
	// it asks drains every node, under the lock that the feeds, the
	// reconcilers and the admission check share. A judgement that runs
	// out is said in a NotJudged Event and not tried again for that
	// generation.
	Budget time.Duration

	mu sync.Mutex
	// told remembers, per workload name, the generation last judged of
	// each object of that name (a Deployment and a StatefulSet may share
	// one); an object's entry goes with it.
	told map[types.NamespacedName]map[types.UID]int64
}

// DefaultBudget bounds one judgement of a change that landed: off the
// request's path, with the pre-flight, five times the admission check's.
const DefaultBudget = 10 * time.Second

// Reasons of the Events said about a judgement rather than a finding.
const (
	// ReasonNotJudged is a change whose judgement ran out of its budget.
	ReasonNotJudged = "NotJudged"
)

// Reconcile judges a workload whose placement-relevant fields changed,
// and forgets the objects of that name that are gone.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	workloads, err := targets.Named(ctx, r.Client, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.keepOnly(req.NamespacedName, workloads)
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
	met, due := r.due(obj)
	if !due {
		return nil
	}
	said, err := r.saidIfNew(ctx, obj, met)
	if err != nil {
		r.forget(obj)
		return err
	}
	if judgedBefore(said, obj.GetGeneration()) {
		return nil
	}
	findings, err := r.judge(ctx, obj)
	if errors.Is(err, placement.ErrInterrupted) && ctx.Err() == nil {
		r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonNotJudged, findingAction, "%s",
			noteOf(fmt.Sprintf("the change was not judged within %s; kubectl placement lint judges it offline", r.budget()), obj.GetGeneration()))
		return nil
	}
	if err != nil || len(findings) == 0 {
		if err != nil {
			r.forget(obj)
		}
		return err
	}
	if said == nil {
		if said, err = r.said(ctx, obj); err != nil {
			r.forget(obj)
			return err
		}
	}
	for _, f := range findings {
		kind := corev1.EventTypeNormal
		if f.Blocking {
			kind = corev1.EventTypeWarning
		}
		note := noteOf(f.Message, obj.GetGeneration())
		if said[f.Type+"\x00"+note] {
			continue
		}
		r.Recorder.Eventf(obj, nil, kind, f.Type, findingAction, "%s", note)
	}
	return nil
}

// judge asks the one question about obj as it runs now, within the
// budget.
func (r *Reconciler) judge(ctx context.Context, obj client.Object) ([]admission.Finding, error) {
	migrations, err := r.Cluster.Migrations(ctx, obj.GetNamespace())
	if err != nil || migrated(migrations, obj) {
		return nil, err
	}
	t, err := r.Cluster.Live(ctx, obj)
	if err != nil {
		return nil, err
	}
	policies, err := r.Cluster.Policies(ctx, obj.GetNamespace())
	if err != nil {
		return nil, err
	}
	// The change has landed and what it replaced is gone: every hard
	// constraint is judged as the workload's own. Off the request's path,
	// the pre-flight is asked too.
	ch := planning.Change{Target: t, Migrations: migrations, Policies: policies, Preflight: true}
	ctx, cancel := context.WithTimeout(ctx, r.budget())
	defer cancel()
	var findings []admission.Finding
	err = r.Cluster.With(ctx, func(snap *placement.Snapshot) error {
		var err error
		findings, err = admission.Judge(snap, ch)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("judge %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return findings, nil
}

func (r *Reconciler) budget() time.Duration {
	if r.Budget > 0 {
		return r.Budget
	}
	return DefaultBudget
}

// findingAction is the action of a finding's Event.
const findingAction = "Judged"

// noteOf is the note of an Event of a judgement: what was found, and the
// generation of the workload it was found of, which tells one change's
// findings from the next one's.
func noteOf(what string, generation int64) string {
	return fmt.Sprintf("%s (generation %d)", what, generation)
}

// judgedBefore reports Events that say the generation was judged: a
// finding of it, or that its judgement ran out of its budget.
func judgedBefore(said map[string]bool, generation int64) bool {
	suffix := fmt.Sprintf(" (generation %d)", generation)
	for k := range said {
		if strings.HasSuffix(k, suffix) {
			return true
		}
	}
	return false
}

// saidIfNew reads what was said of a workload this leader meets for the
// first time (met is false): a leader before it may have judged it.
// nil when this leader has judged it before.
func (r *Reconciler) saidIfNew(ctx context.Context, obj client.Object, met bool) (map[string]bool, error) {
	if met {
		return nil, nil
	}
	return r.said(ctx, obj)
}

// said are the judgements recorded of the workload already, by reason and
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
	delete(r.told[client.ObjectKeyFromObject(obj)], obj.GetUID())
}

// due reports whether the workload's generation is yet to be judged, and
// remembers it; met says this leader has judged the object before.
func (r *Reconciler) due(obj client.Object) (met, due bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := client.ObjectKeyFromObject(obj)
	if r.told == nil {
		r.told = map[types.NamespacedName]map[types.UID]int64{}
	}
	if r.told[key] == nil {
		r.told[key] = map[types.UID]int64{}
	}
	last, met := r.told[key][obj.GetUID()]
	if met && last >= obj.GetGeneration() {
		return true, false
	}
	r.told[key][obj.GetUID()] = obj.GetGeneration()
	return met, true
}

// keepOnly forgets the objects of the name that are gone.
func (r *Reconciler) keepOnly(key types.NamespacedName, live []client.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid := range r.told[key] {
		if !slices.ContainsFunc(live, func(o client.Object) bool { return o.GetUID() == uid }) {
			delete(r.told[key], uid)
		}
	}
	if len(r.told[key]) == 0 {
		delete(r.told, key)
	}
}

// remembered counts the workloads whose judgement this leader remembers.
func (r *Reconciler) remembered() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, byUID := range r.told {
		n += len(byUID)
	}
	return n
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
		// A workload that goes is forgotten.
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	b := ctrl.NewControllerManagedBy(mgr).Named("admissionfindings")
	for _, k := range targets.Kinds() {
		b = b.Watches(k.New(), &handler.EnqueueRequestForObject{}, builder.WithPredicates(relevant))
	}
	return b.Complete(r)
}
