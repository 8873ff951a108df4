package e2e

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/placement-guard/placement-guard/test/utils"
)

// Incident 001: hard hostname anti-affinity, 2 replicas on 2 nodes and the
// default rolling update (maxSurge 25% -> 1, maxUnavailable 25% -> 0).
var _ = Describe("Incident 001 without placement-guard: hard anti-affinity with replicas == nodes", Label("baseline", "incident-001"), func() {
	It("deadlocks the next rollout with the surge pod Pending forever", func(ctx SpecContext) {
		env := newEnv(ctx, "i001-baseline")
		for _, n := range []string{"node-0", "node-1"} {
			_, err := env.AddNode(ctx, n, nil)
			Expect(err).NotTo(HaveOccurred())
		}
		web := utils.Deployment(env.Namespace, "web", env.Pool(), 2, nil)
		web.Spec.ProgressDeadlineSeconds = ptr.To[int32](10)
		web.Spec.Template.Spec.Affinity = utils.HostnameAntiAffinity(map[string]string{"app": "web"})
		Expect(k8sClient.Create(ctx, web)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, utils.ObjectKey(web), web)).To(Succeed())
			g.Expect(utils.RolledOut(web)).To(BeTrue())
		}).Should(Succeed())

		By("an image change starts a rolling update with the default strategy")
		updateDeployment(ctx, web.Namespace, web.Name, func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].Image = "registry.invalid/web:2"
		})

		By("the surge pod cannot schedule and no old pod may go")
		surgePending := func(g Gomega) {
			pods, err := utils.PodsOf(ctx, k8sClient, env.Namespace, map[string]string{"app": "web"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods).To(HaveLen(3), utils.Placement(pods))
			var running, pending int
			for _, p := range pods {
				if utils.Running(p) {
					running++
				}
				if ok, msg := utils.Unschedulable(p); ok {
					g.Expect(msg).To(ContainSubstring("0/"))
					g.Expect(msg).To(ContainSubstring("didn't match pod anti-affinity rules"))
					pending++
				}
			}
			g.Expect(running).To(Equal(2))
			g.Expect(pending).To(Equal(1))
		}
		Eventually(surgePending).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, utils.ObjectKey(web), web)).To(Succeed())
			cond := utils.DeploymentCondition(web, appsv1.DeploymentProgressing)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(cond.Reason).To(Equal("ProgressDeadlineExceeded"))
		}).Should(Succeed())
		// Past the progress deadline nothing changes: the deadlock does not
		// resolve by itself.
		Consistently(surgePending).WithTimeout(3 * time.Second).Should(Succeed())
		Expect(web.Status.UpdatedReplicas).To(Equal(int32(1)))
		Expect(web.Status.AvailableReplicas).To(Equal(int32(2)))
	})
})
