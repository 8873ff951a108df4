package faults

import (
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/test/faultproxy"
	"github.com/placement-guard/placement-guard/test/utils"
)

var _ = Describe("F21: the operator's Deployment watch stalls while its target is scaled past its nodes", Label("faults", "F21"), func() {
	It("records and writes no stage decided on the stale read, and asks for the capacity the new size needs once its watch is back", func(ctx SpecContext) {
		env := newEnv(ctx, "f21")
		for _, n := range []string{"data-0", "data-1", "data-2"} {
			_, err := env.AddNode(ctx, n, map[string]string{"role": dataRole})
			Expect(err).NotTo(HaveOccurred())
		}
		web := utils.Deployment(env.Namespace, "web", env.Pool(), 2, nil)
		Expect(k8sClient.Create(ctx, web)).To(Succeed())
		Expect(env.WaitRunning(ctx, map[string]string{"app": "web"}, 2)).To(Succeed())

		// The operator's list and watch of Deployments (cluster-wide, no
		// name) are refused while stalled; its reads of one Deployment by
		// name and everything else pass. A dry run of a stage on web is
		// counted: the operator decided to write it.
		isDeploymentFeed := func(r faultproxy.Request) bool {
			return r.Method == "GET" && r.Group == "apps" && r.Resource == "deployments" && r.Name == ""
		}
		var mu sync.Mutex
		stalled, watching, dryRuns := false, false, 0
		mgr, proxy := operator("f21", func(r faultproxy.Request) faultproxy.Action {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case isDeploymentFeed(r) && stalled:
				return faultproxy.Action{Kind: faultproxy.Fail, Code: 503}
			case isDeploymentFeed(r) && r.Watch:
				watching = true
			case r.Namespace == env.Namespace && r.Method == "PATCH" && r.Resource == "deployments" && r.Name == "web" && !r.Write:
				dryRuns++
			}
			return faultproxy.Action{}
		})
		DeferCleanup(func() {
			if CurrentSpecReport().Failed() {
				AddReportEntry("the manager's log", mgr.log(20000))
			}
		})
		Eventually(func() bool { mu.Lock(); defer mu.Unlock(); return watching }, time.Minute).Should(BeTrue(),
			"the operator listed the Deployments, web at two replicas among them, and watches them")

		By("stalling the operator's Deployment feed, then scaling web to four replicas on three nodes")
		mu.Lock()
		stalled = true
		mu.Unlock()
		proxy.CutWatches(func(r faultproxy.Request) bool { return isDeploymentFeed(r) && r.Watch })
		live := &appsv1.Deployment{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(web), live)).To(Succeed())
		live.Spec.Replicas = ptr.To[int32](4)
		Expect(k8sClient.Update(ctx, live)).To(Succeed())
		Expect(env.WaitRunning(ctx, map[string]string{"app": "web"}, 4)).To(Succeed())

		pm := webOneAHost(env.Namespace)
		Expect(k8sClient.Create(ctx, pm)).To(Succeed())

		By("the operator decides on web as it last read it (two replicas on three nodes): its dry runs are refused, and nothing is recorded or written")
		Eventually(func() bool {
			mu.Lock()
			defer mu.Unlock()
			return dryRuns >= 3 || deploymentWrites(proxy, env.Namespace) > 0
		}, time.Minute).Should(BeTrue(), "the operator tried the soft stage on its stale read, again and again, or wrote it")
		Expect(deploymentWrites(proxy, env.Namespace)).To(BeZero(), "no write to web on a read the API server has moved past")
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pm), pm)).To(Succeed())
		Expect(pm.Status.Operation).To(BeNil(), "no intent recorded on a stale read")

		By("the feed is back: four replicas need a fourth node, and the migration waits for it, having written nothing")
		mu.Lock()
		stalled = false
		mu.Unlock()
		Eventually(phaseOf(ctx, pm), 2*time.Minute).Should(Equal(pgv1.PhaseWaitingForCapacity))
		Expect(pm.Status.Capacity.RequiredNodes).To(Equal(int32(4)))
		Expect(deploymentWrites(proxy, env.Namespace)).To(BeZero())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(web), live)).To(Succeed())
		Expect(live.Spec.Template.Spec.Affinity).To(BeNil(), "web's template as it was")
	}, NodeTimeout(5*time.Minute))
})
