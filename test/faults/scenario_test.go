package faults

import (
	"context"
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/test/utils"
)

// scenario is a migration of the shape the incidents had: a workload "web"
// of two replicas to keep apart per host, a protected broker beside it
// that must never be recreated, a capacity wait for the third data node the
// hard stage's surge pod needs, then soft, soak and hard.
type scenario struct {
	env   *utils.Env
	kind  pgv1.WorkloadKind
	final pgv1.Stage
	soak  time.Duration
	// name is the migration's.
	name string
	// template is web's pod template before the migration; generation its
	// generation then.
	template   corev1.PodSpec
	generation int64
	broker     map[string]pod
	mon        *monitor
	// sampleEvery overrides the monitor's quarter second.
	sampleEvery time.Duration
}

type pod struct {
	UID      types.UID
	Restarts int32
}

const dataRole = "data"

// newScenario sets a scenario up, waiting for capacity with two of its
// three data nodes.
func newScenario(ctx context.Context, env *utils.Env, kind pgv1.WorkloadKind, final pgv1.Stage, soak time.Duration) *scenario {
	s := &scenario{env: env, kind: kind, final: final, soak: soak, name: "web-apart"}
	for _, n := range []string{"data-0", "data-1"} {
		_, err := env.AddNode(ctx, n, map[string]string{"role": dataRole})
		Expect(err).NotTo(HaveOccurred())
	}
	_, err := env.AddNode(ctx, "app-0", map[string]string{"role": "app"})
	Expect(err).NotTo(HaveOccurred())
	onRole := func(spec *corev1.PodSpec, role string) { spec.NodeSelector["role"] = role }
	broker := utils.Deployment(env.Namespace, "broker", env.Pool(), 1, nil)
	onRole(&broker.Spec.Template.Spec, "app")
	Expect(k8sClient.Create(ctx, broker)).To(Succeed())
	switch kind {
	case pgv1.KindDeployment:
		d := utils.Deployment(env.Namespace, "web", env.Pool(), 2, nil)
		onRole(&d.Spec.Template.Spec, dataRole)
		Expect(k8sClient.Create(ctx, d)).To(Succeed())
	case pgv1.KindStatefulSet:
		st := utils.StatefulSet(env.Namespace, "web", env.Pool(), 2)
		onRole(&st.Spec.Template.Spec, dataRole)
		Expect(k8sClient.Create(ctx, st)).To(Succeed())
	}
	Expect(env.WaitRunning(ctx, map[string]string{"app": "web"}, 2)).To(Succeed())
	Expect(env.WaitRunning(ctx, map[string]string{"app": "broker"}, 1)).To(Succeed())
	s.broker = s.pods(ctx, "broker")
	obj := s.workload(ctx)
	s.template, s.generation = *templateOf(obj).DeepCopy(), obj.GetGeneration()
	spec := pgv1.PlacementMigrationSpec{
		Targets:      []pgv1.TargetRef{{Kind: kind, Name: "web"}},
		Constraint:   pgv1.Constraint{PodAntiAffinity: &pgv1.PodAntiAffinityConstraint{TopologyKey: corev1.LabelHostname}},
		Capacity:     &pgv1.Capacity{NodeSelector: pgv1.Labels(map[string]string{"role": dataRole}), MinNodes: ptr.To[int32](3)},
		FinalStage:   final,
		SoakDuration: &metav1.Duration{Duration: soak},
		StageTimeout: &metav1.Duration{Duration: 3 * time.Minute},
		Guards: &pgv1.Guards{MinPodAge: &metav1.Duration{},
			ProtectedPods: pgv1.Labels(map[string]string{"app": "broker"})},
	}
	Expect(k8sClient.Create(ctx, &pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: s.name}, Spec: spec})).To(Succeed())
	return s
}

// addCapacity adds the third data node the hard stage needs.
func (s *scenario) addCapacity(ctx context.Context) {
	_, err := s.env.AddNode(ctx, "data-2", map[string]string{"role": dataRole})
	Expect(err).NotTo(HaveOccurred())
}

// dataNodesWithoutWeb counts the first two data nodes no pod of web runs
// on.
func (s *scenario) dataNodesWithoutWeb(ctx context.Context) int32 {
	free := int32(0)
	for _, n := range s.nodesWithoutWeb(ctx, "data-0", "data-1") {
		if n != "" {
			free++
		}
	}
	return free
}

// nodesWithoutWeb are the nodes of names no pod of web runs on, by their
// cluster names, "" for a node that holds one.
func (s *scenario) nodesWithoutWeb(ctx context.Context, names ...string) []string {
	pods, err := utils.PodsOf(ctx, k8sClient, s.env.Namespace, map[string]string{"app": "web"})
	Expect(err).NotTo(HaveOccurred())
	used := map[string]bool{}
	for _, p := range pods {
		used[p.Spec.NodeName] = true
	}
	out := make([]string, len(names))
	for i, n := range names {
		if name := s.env.NodeName(n); !used[name] {
			out[i] = name
		}
	}
	return out
}

// freeDataNode is the data node no pod of web runs on: the one the hard
// stage's surge pod needs.
func (s *scenario) freeDataNode(ctx context.Context) string {
	for _, name := range s.nodesWithoutWeb(ctx, "data-0", "data-1", "data-2") {
		if name != "" {
			return name
		}
	}
	// The three nodes are busy: the hard stage came before the soft one
	// settled. Nothing to cordon; the end state will show it.
	return ""
}

func (s *scenario) workload(ctx context.Context) client.Object {
	var obj client.Object = &appsv1.Deployment{}
	if s.kind == pgv1.KindStatefulSet {
		obj = &appsv1.StatefulSet{}
	}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: s.env.Namespace, Name: "web"}, obj)).To(Succeed())
	return obj
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

func (s *scenario) migration(ctx context.Context) (*pgv1.PlacementMigration, error) {
	pm := &pgv1.PlacementMigration{}
	return pm, k8sClient.Get(ctx, client.ObjectKey{Namespace: s.env.Namespace, Name: s.name}, pm)
}

func (s *scenario) pods(ctx context.Context, app string) map[string]pod {
	out, err := s.podsOf(ctx, app)
	Expect(err).NotTo(HaveOccurred())
	return out
}

// podsOf identifies the incarnations of app's pods.
func (s *scenario) podsOf(ctx context.Context, app string) (map[string]pod, error) {
	pods, err := utils.PodsOf(ctx, k8sClient, s.env.Namespace, map[string]string{"app": app})
	if err != nil {
		return nil, err
	}
	out := map[string]pod{}
	for _, p := range pods {
		var r int32
		for _, c := range p.Status.ContainerStatuses {
			r += c.RestartCount
		}
		out[p.Name] = pod{UID: p.UID, Restarts: r}
	}
	return out, nil
}

// phase is for Eventually: the migration's phase once its status
// describes its spec; "" while the API server does not answer.
func (s *scenario) phase(ctx context.Context) func() pgv1.Phase {
	return func() pgv1.Phase {
		pm, err := s.migration(ctx)
		if err != nil || pm.Status.ObservedGeneration != pm.Generation {
			return ""
		}
		return pm.Status.Phase
	}
}

func (s *scenario) explain(ctx context.Context) func() string {
	return func() string {
		pm, err := s.migration(ctx)
		if err != nil {
			return err.Error()
		}
		out := fmt.Sprintf("%s: phase %s (generation %d, observed %d)", s.env.Namespace, pm.Status.Phase, pm.Generation, pm.Status.ObservedGeneration)
		for _, c := range pm.Status.Conditions {
			out += fmt.Sprintf("\n  %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
		}
		return out
	}
}

// ours counts the migration's entries in a template, and says which stage
// the strongest is at.
func (s *scenario) ours(spec *corev1.PodSpec) (int, pgv1.Stage) {
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	c := placement.Constraint{AntiAffinity: &placement.AntiAffinity{TopologyKey: corev1.LabelHostname}}
	n, stage := 0, pgv1.StageNone
	for _, st := range []pgv1.Stage{pgv1.StageSoft, pgv1.StageHard} {
		entry, _ := c.Entry(selector, st)
		if placement.Carries(spec, entry) {
			n++
			stage = st
		}
	}
	return n, stage
}

// monitor checks the invariants every quarter second (the scenario's
// sampleEvery when set), while the spec runs.
type monitor struct {
	s      *scenario
	mu     sync.Mutex
	broken []string
	// checkOthers is false while a spec changes the template itself.
	checkOthers bool
	sawHard     bool
	samples     int
	stop        context.CancelFunc
	done        chan struct{}
}

// watch starts the monitor; end stops it and fails the spec on a broken
// invariant.
func (s *scenario) watch(ctx context.Context) *monitor {
	m := &monitor{s: s, checkOthers: true, done: make(chan struct{})}
	ctx, m.stop = context.WithCancel(ctx)
	go func() {
		defer GinkgoRecover()
		defer close(m.done)
		for ctx.Err() == nil {
			m.sample(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(s.sampleInterval()):
			}
		}
	}()
	s.mon = m
	return m
}

// sampleInterval is how often the scenario's monitor reads the cluster.
func (s *scenario) sampleInterval() time.Duration {
	if s.sampleEvery > 0 {
		return s.sampleEvery
	}
	return 250 * time.Millisecond
}

func (m *monitor) fail(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.broken) < 20 {
		m.broken = append(m.broken, fmt.Sprintf(time.Now().Format("15:04:05.000 ")+format, args...))
	}
}

// sample checks I1, I2, I3, I4, I6 and the kstatus part of I7 on one
// reading of the cluster; a reading the API server does not answer (an
// outage spec) is skipped.
func (m *monitor) sample(ctx context.Context) {
	s := m.s
	pm, err := s.migration(ctx)
	if err != nil {
		return
	}
	var obj client.Object = &appsv1.Deployment{}
	if s.kind == pgv1.KindStatefulSet {
		obj = &appsv1.StatefulSet{}
	}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: s.env.Namespace, Name: "web"}, obj); err != nil {
		return
	}
	m.samples++
	spec := templateOf(obj)
	n, stage := s.ours(spec)
	if n > 1 {
		m.fail("I1: web carries %d entries of the migration", n)
	}
	if m.checkOthers {
		rest := spec.DeepCopy()
		rest.Affinity = s.template.Affinity
		if !equality.Semantic.DeepEqual(*rest, s.template) {
			m.fail("I1: fields other than the migration's changed in web's template")
		}
	}
	if stage == pgv1.StageHard && !m.sawHard {
		m.sawHard = true
		if pm.Spec.Final() != pgv1.StageHard {
			m.fail("I2: Hard with finalStage %s", pm.Spec.Final())
		}
		soaked := false
		for _, ts := range pm.Status.Targets {
			if ts.Verified != nil && ts.Verified.Stage == pgv1.StageSoft && time.Since(ts.Verified.At.Time) >= s.soak-time.Second {
				soaked = true
			}
			if ts.Verified != nil && ts.Verified.Stage == pgv1.StageHard {
				soaked = true
			}
		}
		if !soaked {
			m.fail("I2: Hard appeared without a verified Soft stage soaked for %s: %+v", s.soak, pm.Status.Targets)
		}
	}
	current := pm.Status.ObservedGeneration == pm.Generation
	switch {
	case current && pm.Status.Phase == pgv1.PhaseSucceeded:
		if pm.Status.Operation != nil {
			m.fail("I3: Succeeded with an operation in flight")
		}
		for _, ts := range pm.Status.Targets {
			if ts.Verified == nil || ts.Verified.Stage != pm.Spec.Final() {
				m.fail("I3: Succeeded with %s/%s verified at %+v", ts.Kind, ts.Name, ts.Verified)
			}
		}
		m.noPendingWebPods(ctx)
	case current && pm.Status.Phase == pgv1.PhaseRolledBack:
		if !rolledOut(obj) {
			m.fail("I4: RolledBack before the restored template rolled out")
		}
	}
	if now, err := s.podsOf(ctx, "broker"); err == nil && !equality.Semantic.DeepEqual(now, s.broker) {
		m.fail("I6: the protected broker changed: %v, was %v", now, s.broker)
	}
	m.checkKstatus(pm)
}

func (m *monitor) noPendingWebPods(ctx context.Context) {
	pods, err := utils.PodsOf(ctx, k8sClient, m.s.env.Namespace, map[string]string{"app": "web"})
	if err != nil {
		return
	}
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			m.fail("I3: Succeeded with pod %s Pending", p.Name)
		}
	}
}

// checkKstatus is the kstatus part of I7: the verdict Flux, Helm and
// kubectl reach agrees with the phase. A migration the operator has not
// written yet has no phase (and no verdict of its own to agree with).
func (m *monitor) checkKstatus(pm *pgv1.PlacementMigration) {
	if pm.Status.Phase == "" {
		return
	}
	pm.APIVersion, pm.Kind = pgv1.GroupVersion.String(), "PlacementMigration"
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pm)
	if err != nil {
		return
	}
	res, err := status.Compute(&unstructured.Unstructured{Object: raw})
	if err != nil {
		m.fail("I7: kstatus: %v", err)
		return
	}
	want := status.InProgressStatus
	if pm.Status.ObservedGeneration == pm.Generation {
		switch pm.Status.Phase {
		case pgv1.PhaseSucceeded, pgv1.PhasePlanned:
			want = status.CurrentStatus
		case pgv1.PhaseBlocked, pgv1.PhaseRolledBack, pgv1.PhaseFailed:
			want = status.FailedStatus
		}
	}
	if res.Status != want {
		m.fail("I7: kstatus %s for phase %s", res.Status, pm.Status.Phase)
	}
	if meta.IsStatusConditionTrue(pm.Status.Conditions, pgv1.ConditionReconciling) && meta.IsStatusConditionTrue(pm.Status.Conditions, pgv1.ConditionStalled) {
		m.fail("I7: Reconciling and Stalled both True")
	}
}

// end stops the monitor and checks I5: the template changed at most once
// per stage and rollback.
func (m *monitor) end(ctx context.Context, stages int) {
	m.stop()
	<-m.done
	s := m.s
	pm, err := s.migration(ctx)
	Expect(err).NotTo(HaveOccurred())
	rollbacks := 0
	for _, ts := range pm.Status.Targets {
		for _, st := range ts.Stages {
			if st.Outcome == pgv1.OutcomeRolledBack {
				rollbacks++
			}
		}
	}
	if changes := s.workload(ctx).GetGeneration() - s.generation; changes > int64(stages+rollbacks) {
		m.fail("I5: the template changed %d times for %d stage(s) and %d rollback(s)", changes, stages, rollbacks)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	Expect(m.samples).To(BeNumerically(">", 0), "the monitor never read the cluster")
	Expect(m.broken).To(BeEmpty(), "invariants broken in %s", s.env.Namespace)
}

func rolledOut(obj client.Object) bool {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		want := ptr.Deref(o.Spec.Replicas, 1)
		return o.Status.ObservedGeneration >= o.Generation && o.Status.UpdatedReplicas == want && o.Status.AvailableReplicas == want && o.Status.Replicas == want
	case *appsv1.StatefulSet:
		return o.Status.ObservedGeneration >= o.Generation && o.Status.UpdateRevision == o.Status.CurrentRevision && o.Status.ReadyReplicas == ptr.Deref(o.Spec.Replicas, 1)
	}
	return false
}
