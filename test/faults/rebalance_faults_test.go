package faults

import (
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

var _ = Describe("F16: the operator killed between an eviction of mode Evict and its record", Label("faults", "F16"), func() {
	It("resumes the move without evicting a second pod, and ends 2/2/2", func(ctx SpecContext) {
		env := newEnv(ctx, "f16")
		Expect(utils.BindRebalanceRole(ctx, k8sClient, env.Namespace)).To(Succeed())
		zones, err := env.AddZones(ctx, []string{"zone-a", "zone-b"}, 1)
		Expect(err).NotTo(HaveOccurred())
		d := utils.Deployment(env.Namespace, "web", env.Pool(), 0, nil)
		Expect(k8sClient.Create(ctx, d)).To(Succeed())
		Expect(env.PlaceReplicas(ctx, d, zones, map[string]int{"zone-a": 3, "zone-b": 3})).To(Succeed())

		var mu sync.Mutex
		killed := false
		var mgr *manager
		isEviction := func(r faultproxy.Request) bool {
			return r.Write && r.Namespace == env.Namespace && r.Resource == "pods" && r.Subresource == "eviction"
		}
		mgr, proxy := operator("f16", func(r faultproxy.Request) faultproxy.Action {
			mu.Lock()
			defer mu.Unlock()
			if !isEviction(r) || killed {
				return faultproxy.Action{}
			}
			killed = true
			return faultproxy.Action{Kind: faultproxy.AfterCommit, Then: func() { mgr.kill() }}
		})
		pm := &pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: "web-zones"}, Spec: pgv1.PlacementMigrationSpec{
			Targets: []pgv1.TargetRef{{Kind: pgv1.KindDeployment, Name: "web"}},
			Constraint: pgv1.Constraint{TopologySpread: &pgv1.TopologySpreadConstraint{TopologyKey: utils.ZoneLabel, MaxSkew: 1,
				LabelSelector: pgv1.Labels(map[string]string{"app": "web"})}},
			FinalStage: pgv1.StageSoft, SoakDuration: &metav1.Duration{Duration: 2 * time.Second},
			Guards:    &pgv1.Guards{MinPodAge: &metav1.Duration{}},
			Rebalance: &pgv1.Rebalance{Mode: pgv1.RebalanceEvict},
		}}
		Expect(k8sClient.Create(ctx, pm)).To(Succeed())
		get := func() *pgv1.PlacementMigration {
			live := &pgv1.PlacementMigration{}
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pm), live)).To(Succeed())
			return live
		}
		Eventually(func() pgv1.Phase { return get().Status.Phase }, 3*time.Minute).Should(Equal(pgv1.PhaseSucceeded))

		By("zone c joins; the first eviction commits and the operator dies before it records it")
		for _, n := range []string{"zone-c-0", "zone-c-1"} {
			name, err := env.AddNode(ctx, n, map[string]string{utils.ZoneLabel: "zone-c"})
			Expect(err).NotTo(HaveOccurred())
			zones["zone-c"] = append(zones["zone-c"], name)
		}
		Eventually(func() bool { mu.Lock(); defer mu.Unlock(); return killed && mgr.exited() }, 2*time.Minute).Should(BeTrue())
		inFlight := get().Status.Rebalance
		Expect(inFlight).NotTo(BeNil())
		Expect(inFlight.Move).NotTo(BeNil(), "the move was recorded before the eviction")
		Expect(inFlight.Move.Evicted).To(BeFalse(), "the operator died before it recorded the eviction")
		evicted := inFlight.Move.Pod
		// The restart comes a few seconds after the replacement was made, as
		// any restart does: the replacement must still be found as the one
		// made since the move was recorded.
		Eventually(func(g Gomega) {
			pods, err := utils.PodsOf(ctx, k8sClient, env.Namespace, map[string]string{"app": "web"})
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
		Eventually(func() map[string]int {
			pods, err := utils.PodsOf(ctx, k8sClient, env.Namespace, map[string]string{"app": "web"})
			Expect(err).NotTo(HaveOccurred())
			var running []corev1.Pod
			for _, p := range pods {
				if utils.Running(p) && p.DeletionTimestamp == nil {
					running = append(running, p)
				}
			}
			return zones.Count(running)
		}, 3*time.Minute, time.Second).Should(Equal(map[string]int{"zone-a": 2, "zone-b": 2, "zone-c": 2}))
		Eventually(func() string {
			c := get().Status.Conditions
			for _, cond := range c {
				if cond.Type == pgv1.ConditionBalanced {
					return cond.Reason
				}
			}
			return ""
		}).Should(Equal(pgv1.ReasonBalanced))
		rb := get().Status.Rebalance
		Expect(rb.Moves).To(HaveLen(2))
		Expect(rb.Moves[0].Pod).To(Equal(evicted))
		for _, mv := range rb.Moves {
			Expect(mv.Result).To(Equal("Landed"), "%+v", mv)
		}
		Expect(proxy.Committed(isEviction)).To(Equal(2), "one eviction per move")
	})
})
