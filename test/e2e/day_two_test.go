package e2e

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/test/utils"
)

// pendingMetric reads the operator's placementguard_pending_target_pods
// for one migration and cause from its registry (the operator runs in
// this process).
func pendingMetric(namespace, name, cause string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != "placementguard_pending_target_pods" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == namespace && labels["name"] == name && labels["cause"] == cause {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

var _ = Describe("Day two: a scale-up beyond what the constraint allows", Label("operator", "day-two"), func() {
	It("turns the succeeded migration Degraded, naming the Pending pods and the nodes missing, and Succeeded again after a scale-down", func(ctx SpecContext) {
		env := newEnv(ctx, "d2-scale")
		for i := range 4 {
			_, err := env.AddNode(ctx, fmt.Sprintf("node-%d", i), nil)
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(k8sClient.Create(ctx, utils.Deployment(env.Namespace, "web", env.Pool(), 3, nil))).To(Succeed())
		allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 3)
		migration(ctx, env.Namespace, "web-apart", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameApart(nil)})
		Eventually(phaseOf(ctx, env.Namespace, "web-apart")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "web-apart"))

		By("kubectl scale --replicas=6 on 4 nodes")
		scale := func(replicas int32) {
			web := getDeployment(ctx, env.Namespace, "web")
			patch := client.MergeFrom(web.DeepCopy())
			web.Spec.Replicas = ptr.To(replicas)
			Expect(k8sClient.Patch(ctx, web, patch)).To(Succeed())
		}
		scale(6)
		scaled := time.Now()
		var ready metav1.Condition
		Eventually(func(g Gomega) {
			g.Expect(phaseOf(ctx, env.Namespace, "web-apart")()).To(Equal(pgv1.PhaseDegraded))
			ready = conditionOf(ctx, env.Namespace, "web-apart", pgv1.ConditionReady)
		}, 30*time.Second).Should(Succeed(), explain(ctx, env.Namespace, "web-apart"))
		AddReportEntry("scale-up to Degraded", time.Since(scaled).Round(time.Second).String())
		Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		Expect(ready.Reason).To(Equal(pgv1.ReasonConstraintUnsatisfied))
		Expect(ready.Message).To(And(ContainSubstring("2 of 6 pods of Deployment/web Pending because of the Hard constraint"), ContainSubstring("4 of 6 qualifying nodes")))
		pods, err := utils.PodsOf(ctx, k8sClient, env.Namespace, map[string]string{"app": "web"})
		Expect(err).NotTo(HaveOccurred())
		var pending []string
		for _, p := range pods {
			if ok, msg := utils.Unschedulable(p); ok {
				Expect(msg).To(ContainSubstring("anti-affinity"), "the scheduler's own verdict")
				pending = append(pending, p.Name)
				Expect(ready.Message).To(ContainSubstring(p.Name))
			}
		}
		Expect(pending).To(HaveLen(2), utils.Placement(pods))
		Expect(conditionOf(ctx, env.Namespace, "web-apart", pgv1.ConditionStalled).Status).To(Equal(metav1.ConditionTrue))
		Expect(pendingMetric(env.Namespace, "web-apart", "constraint")).To(Equal(2.0))
		Eventually(func(g Gomega) {
			var events corev1.EventList
			g.Expect(k8sClient.List(ctx, &events, client.InNamespace(env.Namespace))).To(Succeed())
			var warned bool
			for _, e := range events.Items {
				warned = warned || e.Type == corev1.EventTypeWarning && e.Reason == pgv1.ReasonConstraintUnsatisfied && strings.Contains(e.Message, "Pending")
			}
			g.Expect(warned).To(BeTrue())
		}).Should(Succeed())

		By("scaling back to 3: Ready again")
		scale(3)
		Eventually(phaseOf(ctx, env.Namespace, "web-apart"), 30*time.Second).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "web-apart"))
		Expect(conditionOf(ctx, env.Namespace, "web-apart", pgv1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
		Expect(pendingMetric(env.Namespace, "web-apart", "constraint")).To(Equal(0.0))
	})
})
