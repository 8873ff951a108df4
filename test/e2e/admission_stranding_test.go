package e2e

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/test/utils"
)

// hardWeb is seed 001's web carrying its hard anti-affinity with a
// rollout that fits (maxUnavailable 1), as a workload looks once the
// constraint has landed safely.
func hardWeb(ctx SpecContext, env *utils.Env) {
	seed001(ctx, env)
	updateDeployment(ctx, env.Namespace, "web", func(web *appsv1.Deployment) {
		web.Spec.Template.Spec.Affinity = utils.HostnameAntiAffinity(map[string]string{"app": "web"})
		web.Spec.Strategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(1))
	})
	Eventually(func() bool { return utils.RolledOut(getDeployment(ctx, env.Namespace, "web")) }).Should(BeTrue())
}

var _ = Describe("The admission check of changes that strand pods without touching the constraint", Label("operator", "admission"), func() {
	It("refuses in Deny a hard-constrained workload moved to a pool without its nodes, and warns of it in Warn", func(ctx SpecContext) {
		env := newEnv(ctx, "strand-pool")
		hardWeb(ctx, env)
		labelNamespace(ctx, env.Namespace, "Deny")

		moved := getDeployment(ctx, env.Namespace, "web")
		moved.APIVersion, moved.Kind = "apps/v1", "Deployment"
		moved.Spec.Template.Spec.NodeSelector = map[string]string{utils.PoolLabel: env.Pool() + "-elsewhere"}
		Eventually(func(g Gomega) {
			_, errOut, code := kubectlApply(ctx, env.Namespace, nil, moved.DeepCopy())
			g.Expect(code).NotTo(Equal(0))
			g.Expect(errOut).To(And(ContainSubstring("denied the request"), ContainSubstring("InsufficientCapacity"), ContainSubstring("have 0 of 2 qualifying nodes")))
		}).Should(Succeed())
		Expect(getDeployment(ctx, env.Namespace, "web").Spec.Template.Spec.NodeSelector).To(HaveKeyWithValue(utils.PoolLabel, env.Pool()), "nothing was written")

		By("requests past what the nodes hold are judged too")
		big := getDeployment(ctx, env.Namespace, "web")
		big.APIVersion, big.Kind = "apps/v1", "Deployment"
		big.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("64")
		_, errOut, code := kubectlApply(ctx, env.Namespace, []string{"--dry-run=server"}, big)
		Expect(code).NotTo(Equal(0), "requests no node holds")
		Expect(errOut).To(ContainSubstring("denied the request"))

		By("in Warn the move is admitted, with the warning")
		labelNamespace(ctx, env.Namespace, "Warn")
		Eventually(func(g Gomega) {
			_, errOut, code := kubectlApply(ctx, env.Namespace, []string{"--dry-run=server"}, moved.DeepCopy())
			g.Expect(code).To(Equal(0), errOut)
			g.Expect(errOut).To(And(ContainSubstring("Warning:"), ContainSubstring("have 0 of 2 qualifying nodes")))
		}).Should(Succeed())
	})

	It("judges kubectl scale in Warn, and never refuses it in Deny", func(ctx SpecContext) {
		env := newEnv(ctx, "strand-scale")
		hardWeb(ctx, env)
		for _, mode := range []string{"Warn", "Deny"} {
			labelNamespace(ctx, env.Namespace, mode)
			Eventually(func(g Gomega) {
				out, err := kubectl(ctx, "-n", env.Namespace, "scale", "deployment/web", "--replicas=5", "--dry-run=server")
				g.Expect(err).NotTo(HaveOccurred(), out)
				g.Expect(out).To(And(ContainSubstring("Warning:"), ContainSubstring("Deployment/web"), ContainSubstring("InsufficientCapacity")), mode)
			}).Should(Succeed(), mode)
		}
		out, err := kubectl(ctx, "-n", env.Namespace, "scale", "deployment/web", "--replicas=3")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(getDeployment(ctx, env.Namespace, "web").Spec.Replicas).To(Equal(ptr.To[int32](3)), "Deny never refuses a scale")
		By("the finding is an Event on the Deployment once the scale lands")
		Expect(eventNotes(ctx, env.Namespace, "web", "InsufficientCapacity")).To(ContainElement(ContainSubstring("qualifying nodes")))
	})

	It("admits in Deny the rollback of a workload that is already unsatisfiable, with a warning", func(ctx SpecContext) {
		env := newEnv(ctx, "strand-rollback")
		hardWeb(ctx, env)

		By("a release raised web to 3 replicas on 2 nodes with a rollout that deadlocks, before Deny was on")
		updateDeployment(ctx, env.Namespace, "web", func(bad *appsv1.Deployment) {
			bad.Spec.Replicas = ptr.To[int32](3)
			bad.Spec.Strategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(0))
		})
		labelNamespace(ctx, env.Namespace, "Deny")

		By("the rollback to 2 replicas, still a rollout that deadlocks, leaves it no worse and goes through")
		back := getDeployment(ctx, env.Namespace, "web")
		back.APIVersion, back.Kind = "apps/v1", "Deployment"
		back.Spec.Replicas = ptr.To[int32](2)
		back.ResourceVersion, back.ManagedFields = "", nil // applied as a release would, without a precondition
		Eventually(func(g Gomega) {
			_, errOut, code := kubectlApply(ctx, env.Namespace, []string{"--dry-run=server"}, back.DeepCopy())
			g.Expect(code).To(Equal(0), errOut)
			g.Expect(errOut).To(And(ContainSubstring("RolloutDeadlock"), ContainSubstring("admitted in Deny: the workload was already so")))
		}).Should(Succeed())
		_, errOut, code := kubectlApply(ctx, env.Namespace, nil, back.DeepCopy())
		Expect(code).To(Equal(0), errOut)
		Expect(getDeployment(ctx, env.Namespace, "web").Spec.Replicas).To(Equal(ptr.To[int32](2)))

		By("raising it again is refused: that adds to it")
		Eventually(func(g Gomega) {
			again := getDeployment(ctx, env.Namespace, "web")
			again.Spec.Replicas = ptr.To[int32](3)
			err := k8sClient.Update(ctx, again, client.DryRunAll)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring("InsufficientCapacity"))
		}).Should(Succeed())
	})
})
