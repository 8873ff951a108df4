package e2e

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	"github.com/placement-guard/placement-guard/test/utils"
)

// Incident 004: four single-replica controllers stacked on one worker.
var _ = Describe("Incident 004 without placement-guard: single-replica controllers stacked on one worker", Label("baseline", "incident-004"), func() {
	It("keeps them stacked after more workers join", func(ctx SpecContext) {
		env := newEnv(ctx, "i004-baseline")
		first, err := env.AddNode(ctx, "worker-1", nil)
		Expect(err).NotTo(HaveOccurred())

		partOf := map[string]string{"app.kubernetes.io/part-of": "flux"}
		for _, name := range []string{"source-controller", "kustomize-controller", "helm-controller", "notification-controller"} {
			Expect(k8sClient.Create(ctx, utils.Deployment(env.Namespace, name, env.Pool(), 1, partOf))).To(Succeed())
		}
		uids := map[string]types.UID{}
		Eventually(func(g Gomega) {
			pods, err := utils.PodsOf(ctx, k8sClient, env.Namespace, partOf)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods).To(HaveLen(4))
			for _, p := range pods {
				g.Expect(utils.Running(p)).To(BeTrue(), utils.Placement(pods))
				g.Expect(p.Spec.NodeName).To(Equal(first))
				uids[p.Name] = p.UID
			}
		}).Should(Succeed())

		By("two more workers join")
		for i := 2; i <= 3; i++ {
			_, err := env.AddNode(ctx, fmt.Sprintf("worker-%d", i), nil)
			Expect(err).NotTo(HaveOccurred())
		}

		By("nothing moves: the scheduler never revisits a running pod")
		Consistently(func(g Gomega) {
			pods, err := utils.PodsOf(ctx, k8sClient, env.Namespace, partOf)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods).To(HaveLen(4))
			for _, p := range pods {
				g.Expect(p.Spec.NodeName).To(Equal(first), utils.Placement(pods))
				g.Expect(p.UID).To(Equal(uids[p.Name]))
			}
		}).WithTimeout(3 * time.Second).Should(Succeed())
	})
})
