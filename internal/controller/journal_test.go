package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/clusterstate"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// The journal's promise, checked with a fake client and a fake clock: a
// crash after any write the operator makes (a journal record, a workload
// write, a status record, a finalizer) and a fresh operator afterwards end
// in the same state as no crash, with exactly one template change per
// stage and the soak never shortened.

var errCrashed = errors.New("the operator died after its previous write")

// world is a namespace with nodes, one target and the controllers that
// roll it out: the fake client plays the API server, world.settle the
// Deployment and StatefulSet controllers, the scheduler and the kubelets.
type world struct {
	t      *testing.T
	scheme *runtime.Scheme
	c      client.WithWatch
	clock  *clocktesting.FakeClock
	r      *PlacementMigrationReconciler
	kind   pgv1.WorkloadKind

	// writes counts the operator's writes; crashAfter, when set, makes
	// every write after that one fail until the operator restarts.
	writes     int
	crashAfter int
	crashed    bool
	// statusWrites counts the writes of the migration's status alone.
	statusWrites int
	// changes records when the target's template changed, and to what.
	changes []templateChange
	// applied is each field manager's last applied entry.
	applied map[string]*corev1.PodAntiAffinity
	// stuckOnHard keeps the hard stage from ever rolling out, as a pod
	// that no node admits would.
	stuckOnHard bool
	// slowRollout lets the operator look at a rollout once before it
	// completes, as a rollout that takes a while is seen; lagged counts
	// the looks.
	slowRollout bool
	lagged      int
}

type templateChange struct {
	at    time.Time
	stage pgv1.Stage
}

const ns = "shop"

func newWorld(t *testing.T, kind pgv1.WorkloadKind, spec pgv1.PlacementMigrationSpec) *world {
	t.Helper()
	w := &world{t: t, scheme: runtime.NewScheme(), clock: clocktesting.NewFakeClock(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)), kind: kind}
	if err := clientgoscheme.AddToScheme(w.scheme); err != nil {
		t.Fatal(err)
	}
	if err := pgv1.AddToScheme(w.scheme); err != nil {
		t.Fatal(err)
	}
	objs := []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}}
	for i := range 3 {
		name := fmt.Sprintf("node-%d", i)
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}})
	}
	labels := map[string]string{"app": "web"}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web:1"}}}}
	switch kind {
	case pgv1.KindDeployment:
		objs = append(objs, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", UID: "uid-web", Generation: 1},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}})
	case pgv1.KindStatefulSet:
		objs = append(objs, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", UID: "uid-web", Generation: 1},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl,
				UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}}})
	}
	spec.Targets = []pgv1.TargetRef{{Kind: kind, Name: "web"}}
	objs = append(objs, &pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-apart", Generation: 1, CreationTimestamp: metav1.NewTime(w.clock.Now())}, Spec: spec})
	w.c = fake.NewClientBuilder().WithScheme(w.scheme).
		WithStatusSubresource(&pgv1.PlacementMigration{}, &appsv1.Deployment{}, &appsv1.StatefulSet{}).
		WithObjects(objs...).
		WithIndex(&corev1.Pod{}, clusterstate.ControllerUIDField, clusterstate.ControllerUID).
		WithIndex(&appsv1.ReplicaSet{}, clusterstate.ControllerUIDField, clusterstate.ControllerUID).
		WithInterceptorFuncs(w.interceptor()).
		Build()
	w.rollOut()
	w.restart()
	return w
}

// restart starts a fresh operator: nothing in memory survives.
func (w *world) restart() {
	w.crashed = false
	w.r = &PlacementMigrationReconciler{Client: w.c, APIReader: w.c, Scheme: w.scheme, Clock: w.clock,
		UnschedulableGrace: 30 * time.Second, Budget: DefaultWriteBudget()}
}

// interceptor counts the operator's writes, fails them after a crash, and
// bumps a workload's generation when its template changes, as the API
// server does.
func (w *world) interceptor() interceptor.Funcs {
	write := func() error {
		if w.crashed {
			return errCrashed
		}
		w.writes++
		if w.writes == w.crashAfter {
			w.crashed = true
		}
		return nil
	}
	return interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			dryRun := false
			for _, o := range opts {
				if o == client.DryRunAll {
					dryRun = true
				}
			}
			if !dryRun {
				if err := write(); err != nil {
					return err
				}
			}
			if dryRun {
				return nil
			}
			before := w.template(c).DeepCopy()
			if err := w.apply(c, obj, opts); err != nil {
				return err
			}
			if after := w.template(c); !equality.Semantic.DeepEqual(before, after) {
				w.bumpGeneration(c)
				w.changes = append(w.changes, templateChange{at: w.clock.Now(), stage: placement.StageOfEntry(ours(after))})
			}
			return w.answer(c, obj)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if err := write(); err != nil {
				return err
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if err := write(); err != nil {
				return err
			}
			if _, ok := obj.(*pgv1.PlacementMigration); ok && sub == "status" {
				w.statusWrites++
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	}
}

// apply plays server-side apply for the migration's entries: the fields
// the manager applied last time and no longer applies are removed, the
// ones it applies are set. (The fake client's own apply turns the apply
// configuration into a typed object first, so a Deployment's selector,
// which has no omitempty, would look like a change to it.) Ownership and
// conflicts are the API server's, proven against a real one in
// internal/workloadpatch.
func (w *world) apply(c client.WithWatch, ac runtime.ApplyConfiguration, opts []client.ApplyOption) error {
	raw, err := json.Marshal(ac)
	if err != nil {
		return err
	}
	var applied appsv1.Deployment
	if err := json.Unmarshal(raw, &applied); err != nil {
		return err
	}
	if uid := applied.UID; uid != "" && uid != w.workload(c).GetUID() {
		return apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("uid precondition failed"))
	}
	manager := ""
	for _, o := range opts {
		if fo, ok := o.(client.FieldOwner); ok {
			manager = string(fo)
		}
	}
	if w.applied == nil {
		w.applied = map[string]*corev1.PodAntiAffinity{}
	}
	obj := w.workload(c)
	spec := templateOf(obj)
	paa := &corev1.PodAntiAffinity{}
	if spec.Affinity != nil && spec.Affinity.PodAntiAffinity != nil {
		paa = spec.Affinity.PodAntiAffinity
	}
	if prev := w.applied[manager]; prev != nil {
		paa.RequiredDuringSchedulingIgnoredDuringExecution = slices.DeleteFunc(paa.RequiredDuringSchedulingIgnoredDuringExecution, func(t corev1.PodAffinityTerm) bool {
			return slices.ContainsFunc(prev.RequiredDuringSchedulingIgnoredDuringExecution, func(p corev1.PodAffinityTerm) bool { return equality.Semantic.DeepEqual(p, t) })
		})
		paa.PreferredDuringSchedulingIgnoredDuringExecution = slices.DeleteFunc(paa.PreferredDuringSchedulingIgnoredDuringExecution, func(t corev1.WeightedPodAffinityTerm) bool {
			return slices.ContainsFunc(prev.PreferredDuringSchedulingIgnoredDuringExecution, func(p corev1.WeightedPodAffinityTerm) bool { return equality.Semantic.DeepEqual(p, t) })
		})
	}
	var entry *corev1.PodAntiAffinity
	if a := applied.Spec.Template.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		entry = a.PodAntiAffinity
		paa.RequiredDuringSchedulingIgnoredDuringExecution = append(paa.RequiredDuringSchedulingIgnoredDuringExecution, entry.RequiredDuringSchedulingIgnoredDuringExecution...)
		paa.PreferredDuringSchedulingIgnoredDuringExecution = append(paa.PreferredDuringSchedulingIgnoredDuringExecution, entry.PreferredDuringSchedulingIgnoredDuringExecution...)
	}
	w.applied[manager] = entry
	spec.Affinity = nil
	if len(paa.RequiredDuringSchedulingIgnoredDuringExecution)+len(paa.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
		spec.Affinity = &corev1.Affinity{PodAntiAffinity: paa}
	}
	return c.Update(context.Background(), obj)
}

func templateOf(obj client.Object) *corev1.PodSpec {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return &o.Spec.Template.Spec
	case *appsv1.StatefulSet:
		return &o.Spec.Template.Spec
	}
	return nil
}

// ours is the entry of ours in a template: the anti-affinity terms.
func ours(spec *corev1.PodSpec) *corev1.PodSpec {
	if spec.Affinity == nil || spec.Affinity.PodAntiAffinity == nil {
		return nil
	}
	return &corev1.PodSpec{Affinity: &corev1.Affinity{PodAntiAffinity: spec.Affinity.PodAntiAffinity}}
}

func (w *world) workload(c client.Client) client.Object {
	var obj client.Object = &appsv1.Deployment{}
	if w.kind == pgv1.KindStatefulSet {
		obj = &appsv1.StatefulSet{}
	}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, obj); err != nil {
		w.t.Fatal(err)
	}
	return obj
}

func (w *world) template(c client.Client) *corev1.PodSpec { return templateOf(w.workload(c)) }

// answer fills the apply configuration with the object's generation, as
// the API server's answer to an apply fills the object the client sent.
func (w *world) answer(c client.WithWatch, ac runtime.ApplyConfiguration) error {
	generation := w.workload(c).GetGeneration()
	switch o := ac.(type) {
	case *appsv1ac.DeploymentApplyConfiguration:
		o.WithGeneration(generation)
	case *appsv1ac.StatefulSetApplyConfiguration:
		o.WithGeneration(generation)
	default:
		return fmt.Errorf("the world applies Deployments and StatefulSets, not %T", ac)
	}
	return nil
}

func (w *world) bumpGeneration(c client.WithWatch) {
	obj := w.workload(c)
	obj.SetGeneration(obj.GetGeneration() + 1)
	if err := c.Update(context.Background(), obj); err != nil {
		w.t.Fatal(err)
	}
}

// rollOut plays the workload's controller, the scheduler and the kubelets:
// the current template's pods run, Ready, one per node, and the workload
// reports its generation rolled out.
func (w *world) rollOut() {
	ctx := context.Background()
	obj := w.workload(w.c)
	revision := fmt.Sprintf("g%d", obj.GetGeneration())
	var pods corev1.PodList
	if err := w.c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		w.t.Fatal(err)
	}
	current := 0
	for i := range pods.Items {
		if pods.Items[i].Labels["rev"] == revision {
			current++
			continue
		}
		if err := w.c.Delete(ctx, &pods.Items[i]); err != nil {
			w.t.Fatal(err)
		}
	}
	owner := *metav1.NewControllerRef(obj, appsv1.SchemeGroupVersion.WithKind(string(w.kind)))
	labels := map[string]string{"app": "web", "rev": revision}
	if d, ok := obj.(*appsv1.Deployment); ok {
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-" + revision, UID: types.UID("rs-" + revision),
			Labels: map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: revision}, OwnerReferences: []metav1.OwnerReference{owner}},
			Spec: appsv1.ReplicaSetSpec{Replicas: d.Spec.Replicas, Selector: d.Spec.Selector, Template: *d.Spec.Template.DeepCopy()}}
		rs.Spec.Template.Labels = map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: revision}
		if err := w.c.Create(ctx, rs); err != nil && !strings.Contains(err.Error(), "already exists") {
			w.t.Fatal(err)
		}
		owner = *metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))
		labels[appsv1.DefaultDeploymentUniqueLabelKey] = revision
	} else {
		labels[appsv1.ControllerRevisionHashLabelKey] = revision
	}
	started := metav1.NewTime(w.clock.Now())
	for i := current; i < 2; i++ {
		name := fmt.Sprintf("web-%s-%d", revision, i)
		if w.kind == pgv1.KindStatefulSet {
			name = fmt.Sprintf("web-%d", i)
		}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(fmt.Sprintf("pod-%s-%d", revision, i)),
			Labels: labels, OwnerReferences: []metav1.OwnerReference{owner}, CreationTimestamp: started},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node-%d", i), Containers: []corev1.Container{{Name: "web"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: started}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}}}}
		if err := w.c.Create(ctx, p); err != nil {
			w.t.Fatal(err)
		}
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		o.Status = appsv1.DeploymentStatus{ObservedGeneration: o.Generation, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
		if err := w.c.Status().Update(ctx, o); err != nil {
			w.t.Fatal(err)
		}
	case *appsv1.StatefulSet:
		o.Status = appsv1.StatefulSetStatus{ObservedGeneration: o.Generation, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2,
			CurrentRevision: revision, UpdateRevision: revision}
		if err := w.c.Status().Update(ctx, o); err != nil {
			w.t.Fatal(err)
		}
	}
}

// state rebuilds the engine's snapshot from the objects, as the informers
// would keep it.
func (w *world) state() *clusterstate.ClusterState {
	ctx := context.Background()
	var nodes corev1.NodeList
	var pods corev1.PodList
	if err := w.c.List(ctx, &nodes); err != nil {
		w.t.Fatal(err)
	}
	if err := w.c.List(ctx, &pods); err != nil {
		w.t.Fatal(err)
	}
	state := clusterstate.NewClusterState()
	err := state.With(ctx, func(snap *placement.Snapshot) error {
		for i := range nodes.Items {
			snap.UpsertNode(&nodes.Items[i])
		}
		for i := range pods.Items {
			if err := snap.UpsertPod(&pods.Items[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return state
}

func (w *world) migration() *pgv1.PlacementMigration {
	pm := &pgv1.PlacementMigration{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web-apart"}, pm); err != nil {
		w.t.Fatal(err)
	}
	return pm
}

// run reconciles until the migration has succeeded and a reconcile writes
// nothing, playing the controllers after each reconcile and stepping the
// clock to the timer a quiet reconcile asks for; a crashed operator is
// replaced by a fresh one.
func (w *world) run() {
	w.runUntil(func(pm *pgv1.PlacementMigration) bool {
		return (pm.Status.Phase == pgv1.PhaseSucceeded || pm.Status.Phase == pgv1.PhaseRolledBack) && pm.Status.ObservedGeneration == pm.Generation
	})
}

// runUntil reconciles as run does until done holds of the migration after
// a reconcile that wrote nothing.
func (w *world) runUntil(done func(*pgv1.PlacementMigration) bool) {
	for range 300 {
		w.r.State = w.state()
		before := w.writes
		res, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "web-apart"}})
		if w.crashed {
			w.restart()
			continue
		}
		if err != nil && !errors.Is(err, errCrashed) {
			w.t.Logf("reconcile error (retried): %v", err)
		}
		_, carried := w.ours()
		if w.workload(w.c).GetGeneration() != w.rolledOutGeneration() && !(w.stuckOnHard && carried == pgv1.StageHard) {
			w.clock.Step(time.Second)
			if w.slowRollout && w.lagged == 0 {
				w.lagged++
				continue
			}
			w.lagged = 0
			w.rollOut()
			continue
		}
		if w.writes == before {
			if done(w.migration()) {
				return
			}
			step := res.RequeueAfter
			if step <= 0 {
				step = time.Second
			}
			w.clock.Step(step)
		}
	}
	pm := w.migration()
	w.t.Fatalf("the migration did not settle: phase %s, conditions %+v", pm.Status.Phase, pm.Status.Conditions)
}

// ours is the stage of the migration's entry in the template.
func (w *world) ours() (int, pgv1.Stage) {
	entry := ours(w.template(w.c))
	return 0, placement.StageOfEntry(entry)
}

func (w *world) rolledOutGeneration() int64 {
	switch o := w.workload(w.c).(type) {
	case *appsv1.Deployment:
		return o.Status.ObservedGeneration
	case *appsv1.StatefulSet:
		return o.Status.ObservedGeneration
	}
	return 0
}

// endState is what a user sees once the migration settles.
func (w *world) endState() string {
	pm := w.migration()
	var verified []string
	for _, ts := range pm.Status.Targets {
		if ts.Verified != nil {
			verified = append(verified, string(ts.Kind)+"/"+ts.Name+"="+string(ts.Verified.Stage))
		}
	}
	sort.Strings(verified)
	return fmt.Sprintf("phase=%s stage=%s verified=%v entry=%s op=%v", pm.Status.Phase, pm.Status.Stage, verified,
		placement.StageOfEntry(ours(w.template(w.c))), pm.Status.Operation != nil)
}

func TestACrashAfterAnyWriteEndsTheSameWay(t *testing.T) {
	soak := 10 * time.Minute
	for _, tc := range []struct {
		kind  pgv1.WorkloadKind
		final pgv1.Stage
		// stuck keeps the hard stage from rolling out: it times out and
		// is rolled back.
		stuck bool
		// statusWrites is how often a migration that goes through
		// unhindered writes its status: once per milestone (the Soft
		// stage's intent, each stage's write with the rollout's first
		// word, the Soft stage's verification with the soak and the
		// Hard stage's intent held through it, the success), never for
		// nothing, whether the rollout is seen under way or not.
		statusWrites int
		slow         bool
	}{
		{pgv1.KindDeployment, pgv1.StageHard, false, 5, false},
		{pgv1.KindDeployment, pgv1.StageHard, false, 5, true},
		{pgv1.KindDeployment, pgv1.StageSoft, false, 4, false},
		{pgv1.KindStatefulSet, pgv1.StageHard, false, 5, false},
		{pgv1.KindStatefulSet, pgv1.StageSoft, false, 4, true},
		{pgv1.KindDeployment, pgv1.StageHard, true, 0, false},
	} {
		t.Run(fmt.Sprintf("%s to %s, stuck %v, slow %v", tc.kind, tc.final, tc.stuck, tc.slow), func(t *testing.T) {
			spec := pgv1.PlacementMigrationSpec{
				Constraint: pgv1.Constraint{PodAntiAffinity: &pgv1.PodAntiAffinityConstraint{TopologyKey: corev1.LabelHostname}},
				FinalStage: tc.final, SoakDuration: &metav1.Duration{Duration: soak},
				Guards: &pgv1.Guards{MinPodAge: &metav1.Duration{}},
			}
			clean := newWorld(t, tc.kind, spec)
			clean.stuckOnHard, clean.slowRollout = tc.stuck, tc.slow
			clean.run()
			want := clean.endState()
			stages := 2
			if tc.final == pgv1.StageSoft {
				stages = 1
			}
			if tc.stuck {
				stages = 3 // Soft, Hard, and the rollback to Soft
				if !strings.Contains(want, "phase=RolledBack") {
					t.Fatalf("a hard stage that never rolls out is rolled back: %s", want)
				}
			}
			if len(clean.changes) != stages {
				t.Fatalf("without a crash the template changed %d times, want %d", len(clean.changes), stages)
			}
			t.Logf("without a crash: %s after %d writes, %d of the status", want, clean.writes, clean.statusWrites)
			if tc.statusWrites > 0 && clean.statusWrites != tc.statusWrites {
				t.Errorf("the status was written %d times, want %d: once per milestone", clean.statusWrites, tc.statusWrites)
			}
			for n := 1; n <= clean.writes; n++ {
				w := newWorld(t, tc.kind, spec)
				w.stuckOnHard, w.slowRollout = tc.stuck, tc.slow
				w.crashAfter = n
				w.run()
				if got := w.endState(); got != want {
					t.Errorf("crash after write %d of %d: end state %s, want %s", n, clean.writes, got, want)
				}
				if len(w.changes) != stages {
					t.Errorf("crash after write %d: the template changed %d times, want %d (one per stage and rollback): %+v", n, len(w.changes), stages, w.changes)
				}
				if len(w.changes) >= 2 && w.changes[1].at.Sub(w.changes[0].at) < soak {
					t.Errorf("crash after write %d: the Hard stage came %s after the Soft one, within the %s soak", n, w.changes[1].at.Sub(w.changes[0].at), soak)
				}
				for _, c := range w.changes {
					if tc.final == pgv1.StageSoft && c.stage == pgv1.StageHard {
						t.Errorf("crash after write %d: Hard was written with finalStage Soft", n)
					}
				}
			}
		})
	}
}

func TestTheWriteBudgetStallsAMigrationInsteadOfWriting(t *testing.T) {
	spec := pgv1.PlacementMigrationSpec{
		Constraint:   pgv1.Constraint{PodAntiAffinity: &pgv1.PodAntiAffinityConstraint{TopologyKey: corev1.LabelHostname}},
		SoakDuration: &metav1.Duration{}, Guards: &pgv1.Guards{MinPodAge: &metav1.Duration{}},
	}
	w := newWorld(t, pgv1.KindDeployment, spec)
	w.r.Budget = &WriteBudget{Max: 1, Window: time.Hour}
	reconcile := func() {
		w.r.State = w.state()
		if _, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "web-apart"}}); err != nil {
			t.Fatal(err)
		}
		if w.workload(w.c).GetGeneration() != w.rolledOutGeneration() {
			w.rollOut()
		}
	}
	for range 20 {
		reconcile()
	}
	pm := w.migration()
	if pm.Status.Phase != pgv1.PhaseFailed || !strings.Contains(pm.Status.Conditions[0].Message+pm.Status.Conditions[len(pm.Status.Conditions)-1].Message, "write budget") {
		t.Fatalf("want Failed with the write budget named, got %s: %+v", pm.Status.Phase, pm.Status.Conditions)
	}
	if len(w.changes) != 1 {
		t.Fatalf("one write was allowed, the template changed %d times", len(w.changes))
	}
	if _, stalled := terminal(pm); !stalled {
		t.Fatal("the budget stall holds until a person retries")
	}
	writes := w.writes
	for range 5 {
		reconcile()
	}
	if w.writes != writes {
		t.Fatalf("a stalled migration wrote %d more times", w.writes-writes)
	}

	pm.Annotations = map[string]string{pgv1.RetryAnnotation: "1"}
	if err := w.c.Update(context.Background(), pm); err != nil {
		t.Fatal(err)
	}
	w.run()
	if len(w.changes) != 2 {
		t.Fatalf("after the retry the hard stage is written: %d template changes", len(w.changes))
	}
}

// migrationReads counts the reads of the migration from the API server.
type migrationReads struct {
	client.Reader
	n *int
}

func (r migrationReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*pgv1.PlacementMigration); ok {
		*r.n++
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

// The reconcile that records a stage's intent makes the write it names,
// without reading the migration again: the status write that recorded the
// intent carried an optimistic lock and returned the record the API
// server holds. A reconcile that finds an intent recorded earlier (the
// operator died after recording it) reads the migration from the API
// server before it writes.
func TestTheReconcileThatRecordsAnIntentMakesItsWrite(t *testing.T) {
	// writesBefore is how many writes came before the reconcile that
	// recorded the Soft stage's intent, in a world without a crash.
	var writesBefore int
	{
		w := newWorld(t, pgv1.KindDeployment, heldSpec(time.Minute))
		var reads int
		w.r.APIReader = migrationReads{Reader: w.c, n: &reads}
		for range 10 {
			recordedBefore := w.migration().Status.Operation != nil
			writesBefore = w.writes
			w.reconcile()
			if len(w.changes) == 0 {
				continue
			}
			if recordedBefore {
				t.Fatalf("the Soft stage was written by a reconcile after the one that recorded its intent")
			}
			break
		}
		op := w.migration().Status.Operation
		if len(w.changes) != 1 || op == nil || op.Stage != pgv1.StageSoft || op.Targets[0].AppliedGeneration == 0 {
			t.Fatalf("one reconcile records the Soft stage and writes it, the write recorded: changes %+v, operation %+v", w.changes, op)
		}
		if reads != 0 {
			t.Errorf("the write right after its own intent read the migration from the API server %d times, want none", reads)
		}
	}

	w := newWorld(t, pgv1.KindDeployment, heldSpec(time.Minute))
	var reads int
	for w.writes < writesBefore {
		w.reconcile()
	}
	w.crashAfter = w.writes + 1
	w.r.State = w.state()
	if _, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "web-apart"}}); !errors.Is(err, errCrashed) {
		t.Fatalf("the operator dies right after recording the intent: %v", err)
	}
	if op := w.migration().Status.Operation; op == nil || op.Targets[0].AppliedGeneration != 0 || len(w.changes) != 0 {
		t.Fatalf("the intent recorded, its write not made: changes %+v, operation %+v", w.changes, op)
	}
	w.restart()
	w.r.APIReader = migrationReads{Reader: w.c, n: &reads}
	w.reconcile()
	if len(w.changes) != 1 || reads != 1 {
		t.Errorf("the next operator writes the recorded intent after one read of the migration from the API server: changes %+v, reads %d", w.changes, reads)
	}
}
