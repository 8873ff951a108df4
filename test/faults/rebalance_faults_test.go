package faults

import (
	"context"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/test/faultproxy"
	"github.com/placement-guard/placement-guard/test/utils"
)

// moveScenario is a soft zone spread of web's 6 pods 3/3 over zones a and
// b, with mode Evict, that succeeded; zoneCJoins starts the moves.
type moveScenario struct {
	env   *utils.Env
	zones utils.Zones
	pm    *pgv1.PlacementMigration
}

func newMoveScenario(ctx SpecContext, prefix string) *moveScenario {
	env := newEnv(ctx, prefix)
	Expect(utils.BindRebalanceRole(ctx, k8sClient, env.Namespace)).To(Succeed())
	Expect(utils.BindEvictRole(ctx, k8sClient, env.Namespace)).To(Succeed())
	zones, err := env.AddZones(ctx, []string{"zone-a", "zone-b"}, 1)
	Expect(err).NotTo(HaveOccurred())
	d := utils.Deployment(env.Namespace, "web", env.Pool(), 0, nil)
	Expect(k8sClient.Create(ctx, d)).To(Succeed())
	Expect(env.PlaceReplicas(ctx, d, zones, map[string]int{"zone-a": 3, "zone-b": 3})).To(Succeed())
	return &moveScenario{env: env, zones: zones}
}

// isEviction matches the evictions of the scenario's namespace.
func (m *moveScenario) isEviction(r faultproxy.Request) bool {
	return r.Write && r.Namespace == m.env.Namespace && r.Resource == "pods" && r.Subresource == "eviction"
}

// migrate creates the migration and waits for its success.
func (m *moveScenario) migrate(ctx SpecContext) {
	m.pm = &pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Namespace: m.env.Namespace, Name: "web-zones"}, Spec: pgv1.PlacementMigrationSpec{
		Targets: []pgv1.TargetRef{{Kind: pgv1.KindDeployment, Name: "web"}},
		Constraint: pgv1.Constraint{TopologySpread: &pgv1.TopologySpreadConstraint{TopologyKey: utils.ZoneLabel, MaxSkew: 1,
			LabelSelector: pgv1.Labels(map[string]string{"app": "web"})}},
		FinalStage: pgv1.StageSoft, SoakDuration: &metav1.Duration{Duration: 2 * time.Second},
		Guards:    &pgv1.Guards{MinPodAge: &metav1.Duration{}},
		Rebalance: &pgv1.Rebalance{Mode: pgv1.RebalanceEvict},
	}}
	Expect(k8sClient.Create(ctx, m.pm)).To(Succeed())
	Eventually(func() pgv1.Phase { return m.get(ctx).Status.Phase }, 3*time.Minute).Should(Equal(pgv1.PhaseSucceeded))
}

func (m *moveScenario) get(ctx context.Context) *pgv1.PlacementMigration {
	live := &pgv1.PlacementMigration{}
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(m.pm), live)).To(Succeed())
	return live
}

func (m *moveScenario) zoneCJoins(ctx SpecContext) {
	for _, n := range []string{"zone-c-0", "zone-c-1"} {
		name, err := m.env.AddNode(ctx, n, map[string]string{utils.ZoneLabel: "zone-c"})
		Expect(err).NotTo(HaveOccurred())
		m.zones["zone-c"] = append(m.zones["zone-c"], name)
	}
}

// endsEven waits for 2/2/2 and Balanced, and checks the two moves landed
// where the engine placed them.
func (m *moveScenario) endsEven(ctx SpecContext) *pgv1.RebalanceStatus {
	Eventually(func() map[string]int {
		pods, err := utils.PodsOf(ctx, k8sClient, m.env.Namespace, map[string]string{"app": "web"})
		Expect(err).NotTo(HaveOccurred())
		var running []corev1.Pod
		for _, p := range pods {
			if utils.Running(p) && p.DeletionTimestamp == nil {
				running = append(running, p)
			}
		}
		return m.zones.Count(running)
	}, 3*time.Minute, time.Second).Should(Equal(map[string]int{"zone-a": 2, "zone-b": 2, "zone-c": 2}))
	Eventually(func() string {
		for _, c := range m.get(ctx).Status.Conditions {
			if c.Type == pgv1.ConditionBalanced {
				return c.Reason
			}
		}
		return ""
	}).Should(Equal(pgv1.ReasonBalanced))
	rb := m.get(ctx).Status.Rebalance
	Expect(rb.Moves).To(HaveLen(2))
	for _, mv := range rb.Moves {
		Expect(mv.Result).To(Equal("Landed"), "%+v", mv)
	}
	return rb
}

var _ = Describe("F16: the operator killed between an eviction of mode Evict and its record", Label("faults", "F16"), func() {
	It("resumes the move without evicting a second pod, and ends 2/2/2", func(ctx SpecContext) {
		m := newMoveScenario(ctx, "f16")
		var mu sync.Mutex
		killed := false
		var mgr *manager
		mgr, proxy := operator("f16", func(r faultproxy.Request) faultproxy.Action {
			mu.Lock()
			defer mu.Unlock()
			if !m.isEviction(r) || killed {
				return faultproxy.Action{}
			}
			killed = true
			return faultproxy.Action{Kind: faultproxy.AfterCommit, Then: func() { mgr.kill() }}
		})
		m.migrate(ctx)

		By("zone c joins; the first eviction commits and the operator dies before it records it")
		m.zoneCJoins(ctx)
		Eventually(func() bool { mu.Lock(); defer mu.Unlock(); return killed && mgr.exited() }, 2*time.Minute).Should(BeTrue())
		inFlight := m.get(ctx).Status.Rebalance
		Expect(inFlight).NotTo(BeNil())
		Expect(inFlight.Move).NotTo(BeNil(), "the move was recorded before the eviction")
		Expect(inFlight.Move.Evicted).To(BeFalse(), "the operator died before it recorded the eviction")
		evicted := inFlight.Move.Pod
		// The restart comes a few seconds after the replacement was made, as
		// any restart does: the replacement must still be found as the one
		// made since the move was recorded.
		Eventually(func(g Gomega) {
			pods, err := utils.PodsOf(ctx, k8sClient, m.env.Namespace, map[string]string{"app": "web"})
			g.Expect(err).NotTo(HaveOccurred())
			running := 0
			newest := time.Time{}
			for _, p := range pods {
				g.Expect(p.Name).NotTo(Equal(evicted))
				if utils.Running(p) {
					running++
				}
				if p.CreationTimestamp.After(newest) {
					newest = p.CreationTimestamp.Time
				}
			}
			g.Expect(running).To(Equal(6))
			g.Expect(time.Since(newest)).To(BeNumerically(">", 3*time.Second))
		}).Should(Succeed(), "the ReplicaSet replaced the evicted pod while the operator was down")

		By("restarted, it finishes that move without a second eviction, then makes the next")
		mgr.start()
		rb := m.endsEven(ctx)
		Expect(rb.Moves[0].Pod).To(Equal(evicted))
		Expect(proxy.Committed(m.isEviction)).To(Equal(2), "one eviction per move")
	})
})

var _ = Describe("F17: the pod watch cut and refused with 410 Gone while a move of mode Evict waits for its replacement", Label("faults", "F17"), func() {
	It("relists, judges the replacement on the relisted pods, and ends 2/2/2 with one eviction per move", func(ctx SpecContext) {
		m := newMoveScenario(ctx, "f17")
		isPodWatch := func(r faultproxy.Request) bool { return r.Watch && r.Resource == "pods" && r.Namespace == "" }
		var mu sync.Mutex
		cut, refused, readAgain := false, false, 0
		var proxy *faultproxy.Proxy
		_, proxy = operator("f17", func(r faultproxy.Request) faultproxy.Action {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case m.isEviction(r) && !cut:
				cut = true
				return faultproxy.Action{Kind: faultproxy.AfterCommit, Then: func() { proxy.CutWatches(isPodWatch) }}
			case refused && r.Method == "GET" && r.Resource == "pods" && r.Namespace == "":
				readAgain++
			case cut && !refused && isPodWatch(r):
				// The resourceVersion the feed resumes from is too old: it
				// must list again.
				refused = true
				return faultproxy.Action{Kind: faultproxy.Fail, Code: 410}
			}
			return faultproxy.Action{}
		})
		m.migrate(ctx)
		m.zoneCJoins(ctx)
		Eventually(func() bool { mu.Lock(); defer mu.Unlock(); return refused && readAgain > 0 }, 2*time.Minute).Should(BeTrue(),
			"the pod feed watched again after the cut, was refused, and read the pods again")
		m.endsEven(ctx)
		Expect(proxy.Committed(m.isEviction)).To(Equal(2), "one eviction per move")
	})
})
