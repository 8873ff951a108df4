package e2e

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/test/utils"
)

// A guard judged on a view without the target's pods passes what it would
// refuse. A migration whose protected pods are its target's own must stay
// Blocked, writing nothing, however soon after the pods appeared, or were
// replaced, it first looks: twenty runs, half of each.
var _ = Describe("Guards on a view that is complete", Label("operator", "edges", "guards"), func() {
	It("stays Blocked and writes nothing when its protected target pods appeared, or were replaced, just before its first reconcile (20 runs)", func(ctx SpecContext) {
		env := newEnv(ctx, "guard-view")
		for _, n := range []string{"node-0", "node-1", "node-2"} {
			_, err := env.AddNode(ctx, n, nil)
			Expect(err).NotTo(HaveOccurred())
		}
		protecting := func(app string) pgv1.PlacementMigrationSpec {
			return pgv1.PlacementMigrationSpec{Targets: targetsNamed(app), Constraint: hostnameApart(nil), FinalStage: pgv1.StageSoft,
				Guards: &pgv1.Guards{MinPodAge: &metav1.Duration{}, ProtectedPods: pgv1.SelectorFrom(&metav1.LabelSelector{MatchLabels: map[string]string{"app": app}})}}
		}
		var apps []string
		By("ten Deployments created, each with its migration at once")
		for i := range 10 {
			app := fmt.Sprintf("appear-%d", i)
			apps = append(apps, app)
			Expect(k8sClient.Create(ctx, utils.Deployment(env.Namespace, app, env.Pool(), 2, nil))).To(Succeed())
			migration(ctx, env.Namespace, app, protecting(app))
		}
		By("ten Deployments running, their pods deleted, each with its migration at once")
		var replaced []string
		for i := range 10 {
			app := fmt.Sprintf("replaced-%d", i)
			replaced = append(replaced, app)
			Expect(k8sClient.Create(ctx, utils.Deployment(env.Namespace, app, env.Pool(), 2, nil))).To(Succeed())
		}
		for _, app := range replaced {
			allRunning(ctx, env.Namespace, map[string]string{"app": app}, 2)
		}
		for _, app := range replaced {
			Expect(k8sClient.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(env.Namespace), client.MatchingLabels{"app": app})).To(Succeed())
			migration(ctx, env.Namespace, app, protecting(app))
		}
		apps = append(apps, replaced...)

		for _, app := range apps {
			Eventually(func(g Gomega) {
				pm := getMigration(ctx, env.Namespace, app)
				g.Expect(pm.Status.Phase).To(Equal(pgv1.PhaseBlocked))
				g.Expect(findCondition(pm, pgv1.ConditionReady)).To(And(Not(BeNil()), HaveField("Reason", pgv1.ReasonProtectedPodChanged)))
			}).Should(Succeed(), explain(ctx, env.Namespace, app))
		}
		Consistently(func(g Gomega) {
			for _, app := range apps {
				d := getDeployment(ctx, env.Namespace, app)
				g.Expect(d.Generation).To(Equal(int64(1)), "%s was written", app)
				for _, mf := range d.ManagedFields {
					g.Expect(strings.HasPrefix(mf.Manager, "placement-guard/")).To(BeFalse(), "%s carries a migration's field", app)
				}
				pm := getMigration(ctx, env.Namespace, app)
				g.Expect(pm.Status.Halt).To(BeNil(), "%s rolled back: it wrote a stage", app)
			}
		}).WithTimeout(3 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	})
})
