package e2e

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/placement-guard/placement-guard/test/utils"
)

// Incident 000: a required anti-affinity between a search engine and a graph
// DB merged while only one data node existed.
var _ = Describe("Incident 000 without placement-guard: anti-affinity merged before the second node", Label("baseline", "incident-000"), func() {
	It("leaves the graph DB Pending and the rollout past its progress deadline", func(ctx SpecContext) {
		env := newEnv(ctx, "i000-baseline")
		dataNode, err := env.AddNode(ctx, "data-1", map[string]string{"role": "data"})
		Expect(err).NotTo(HaveOccurred())

		search := utils.Deployment(env.Namespace, "search", env.Pool(), 1, nil)
		graph := utils.Deployment(env.Namespace, "graphdb", env.Pool(), 1, nil)
		graph.Spec.ProgressDeadlineSeconds = ptr.To[int32](5)
		for _, d := range []*appsv1.Deployment{search, graph} {
			d.Spec.Template.Spec.NodeSelector["role"] = "data"
			Expect(k8sClient.Create(ctx, d)).To(Succeed())
		}
		By("both run on the only data node: the single point of failure")
		Eventually(func(g Gomega) {
			pods, err := utils.PodsOf(ctx, k8sClient, env.Namespace, nil)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods).To(HaveLen(2))
			for _, p := range pods {
				g.Expect(utils.Running(p)).To(BeTrue(), utils.Placement(pods))
				g.Expect(p.Spec.NodeName).To(Equal(dataNode))
			}
		}).Should(Succeed())

		By("the chart upgrade adds required anti-affinity against the search engine")
		Expect(k8sClient.Get(ctx, utils.ObjectKey(graph), graph)).To(Succeed())
		graph.Spec.Template.Spec.Affinity = utils.HostnameAntiAffinity(map[string]string{"app": "search"})
		Expect(k8sClient.Update(ctx, graph)).To(Succeed())

		By("the new graph DB pod has nowhere to go")
		Eventually(func(g Gomega) {
			pods, err := utils.PodsOf(ctx, k8sClient, env.Namespace, map[string]string{"app": "graphdb"})
			g.Expect(err).NotTo(HaveOccurred())
			var pending []corev1.Pod
			for _, p := range pods {
				if ok, msg := utils.Unschedulable(p); ok {
					g.Expect(msg).To(ContainSubstring("didn't match pod anti-affinity rules"))
					pending = append(pending, p)
				}
			}
			g.Expect(pending).To(HaveLen(1), utils.Placement(pods))
		}).Should(Succeed())

		By("and the Deployment reports what helm upgrade failed on: Progress deadline exceeded")
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, utils.ObjectKey(graph), graph)).To(Succeed())
			cond := utils.DeploymentCondition(graph, appsv1.DeploymentProgressing)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(cond.Reason).To(Equal("ProgressDeadlineExceeded"))
		}).Should(Succeed())
	})
})
