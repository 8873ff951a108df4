package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/test/localcluster"
	"github.com/placement-guard/placement-guard/test/utils"
)

// pendingMetric reads the operator's placementguard_pending_target_pods
// for one migration and cause, -1 when it has no such series.
func pendingMetric(namespace, name, cause string) float64 {
	return metricValue("placementguard_pending_target_pods", map[string]string{"namespace": namespace, "name": name, "cause": cause})
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
		}, 30*time.Second).Should(Succeed(), explain(ctx, env.Namespace, "web-apart"))
		AddReportEntry("scale-up to Degraded", time.Since(scaled).Round(time.Second).String())
		// The scheduler may call the two new pods unschedulable a second
		// apart, so each passes the grace on its own: the migration can
		// name one before it names both.
		Eventually(func(g Gomega) {
			g.Expect(phaseOf(ctx, env.Namespace, "web-apart")()).To(Equal(pgv1.PhaseDegraded))
			ready = conditionOf(ctx, env.Namespace, "web-apart", pgv1.ConditionReady)
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(pgv1.ReasonConstraintUnsatisfied))
			g.Expect(ready.Message).To(And(ContainSubstring("2 of 6 pods of Deployment/web Pending because of the Hard constraint"), ContainSubstring("4 of 6 qualifying nodes")))
		}, 30*time.Second).Should(Succeed(), explain(ctx, env.Namespace, "web-apart"))
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
		// The scale-down frees a node before the surplus Pending pods are
		// gone: the migration is Succeeded once, not Ready and back.
		Consistently(func() metav1.ConditionStatus {
			return conditionOf(ctx, env.Namespace, "web-apart", pgv1.ConditionReady).Status
		}, 2*time.Second, 10*time.Millisecond).Should(Equal(metav1.ConditionTrue), explain(ctx, env.Namespace, "web-apart"))
		Expect(pendingMetric(env.Namespace, "web-apart", "constraint")).To(Equal(0.0))

		By("an autoscaler with maxReplicas 6 on the 4 nodes")
		hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: "web"}, Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, MinReplicas: ptr.To(int32(3)), MaxReplicas: 6}}
		Expect(k8sClient.Create(ctx, hpa)).To(Succeed())
		Eventually(func() metav1.Condition {
			return conditionOf(ctx, env.Namespace, "web-apart", pgv1.ConditionDisruptionReady)
		}).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", pgv1.ReasonScaleOutUnsatisfiable),
			HaveField("Message", ContainSubstring("may scale Deployment/web to 6 replicas, but under the Hard constraint only 4 fit"))))
	})
})

// kubectl runs bin/kubectl against the local cluster and returns its
// output and error.
func kubectl(ctx SpecContext, args ...string) (string, error) {
	bin, err := localcluster.FindBinaries()
	Expect(err).NotTo(HaveOccurred())
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", cluster.Kubeconfig}, args...)...).CombinedOutput()
	return string(out), err
}

var _ = Describe("Day two: drains under a hard anti-affinity", Label("operator", "day-two"), func() {
	It("predicts in DisruptionReady the drains that cannot complete or strand a pod, as a real kubectl drain then shows", func(ctx SpecContext) {
		env := newEnv(ctx, "d2-drain")
		var nodes []string
		for i := range 3 {
			n, err := env.AddNode(ctx, fmt.Sprintf("node-%d", i), nil)
			Expect(err).NotTo(HaveOccurred())
			nodes = append(nodes, n)
		}
		web := utils.Deployment(env.Namespace, "web", env.Pool(), 3, nil)
		web.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromInt32(1))}
		Expect(k8sClient.Create(ctx, web)).To(Succeed())
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: "web"}, Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(3)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
		Expect(k8sClient.Create(ctx, pdb)).To(Succeed())
		allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 3)
		migration(ctx, env.Namespace, "web-apart", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameApart(nil)})
		Eventually(phaseOf(ctx, env.Namespace, "web-apart")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "web-apart"))
		disruption := func() metav1.Condition {
			return conditionOf(ctx, env.Namespace, "web-apart", pgv1.ConditionDisruptionReady)
		}

		By("a PodDisruptionBudget with minAvailable 3 of 3: no drain completes")
		Eventually(disruption).Should(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", pgv1.ReasonDrainBlockedByBudget)))
		Expect(disruption().Message).To(And(ContainSubstring("PodDisruptionBudget web"), ContainSubstring(nodes[0])))
		out, err := kubectl(ctx, "drain", nodes[0], "--ignore-daemonsets", "--timeout=15s")
		Expect(err).To(HaveOccurred(), "the drain fails as predicted: %s", out)
		Expect(out).To(ContainSubstring("disruption budget"))
		_, err = kubectl(ctx, "uncordon", nodes[0])
		Expect(err).NotTo(HaveOccurred())

		By("a budget that allows one eviction: the evicted pod would have nowhere to go")
		// The disruption controller writes the budget's status: retried on a
		// conflict, as kubectl edit is.
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(pdb), pdb); err != nil {
				return err
			}
			pdb.Spec.MinAvailable = ptr.To(intstr.FromInt32(2))
			return k8sClient.Update(ctx, pdb)
		})).To(Succeed())
		Eventually(disruption).Should(HaveField("Reason", pgv1.ReasonEvictedPodUnplaceable))
		Expect(disruption().Message).To(ContainSubstring("add a qualifying node (N+1)"))

		By("a fourth node: every drain places the evicted pod, and a real drain does")
		_, err = env.AddNode(ctx, "node-3", nil)
		Expect(err).NotTo(HaveOccurred())
		Eventually(disruption).Should(And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", pgv1.ReasonDisruptionsTolerated)))
		out, err = kubectl(ctx, "drain", nodes[0], "--ignore-daemonsets", "--timeout=60s")
		Expect(err).NotTo(HaveOccurred(), out)
		pods := allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 3)
		Expect(distinctNodes(pods)).To(Equal(3))
		for _, p := range pods {
			Expect(p.Spec.NodeName).NotTo(Equal(nodes[0]))
		}
	})
})

var _ = Describe("Day two: a settled migration under pod churn", Label("operator", "day-two"), func() {
	It("writes nothing for a minute while another workload's pods come and go around its targets", func(ctx SpecContext) {
		env := newEnv(ctx, "d2-quiet")
		for i := range 4 {
			_, err := env.AddNode(ctx, fmt.Sprintf("node-%d", i), nil)
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(k8sClient.Create(ctx, utils.Deployment(env.Namespace, "web", env.Pool(), 3, nil))).To(Succeed())
		Expect(k8sClient.Create(ctx, utils.Deployment(env.Namespace, "churn", env.Pool(), 1, nil))).To(Succeed())
		allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 3)
		migration(ctx, env.Namespace, "web-apart", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameApart(nil)})
		Eventually(phaseOf(ctx, env.Namespace, "web-apart")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "web-apart"))
		Eventually(func() metav1.ConditionStatus {
			return conditionOf(ctx, env.Namespace, "web-apart", pgv1.ConditionDisruptionReady).Status
		}).Should(Equal(metav1.ConditionTrue))
		settled := getMigration(ctx, env.Namespace, "web-apart").ResourceVersion

		By("scaling another Deployment of the namespace up and down for a minute")
		churn, stop := context.WithTimeout(ctx, time.Minute)
		defer stop()
		replicas := int32(1)
		for churn.Err() == nil {
			replicas = 4 - replicas // 1, 3, 1, 3, ...
			d := getDeployment(ctx, env.Namespace, "churn")
			patch := client.MergeFrom(d.DeepCopy())
			d.Spec.Replicas = ptr.To(replicas)
			Expect(k8sClient.Patch(ctx, d, patch)).To(Succeed())
			select {
			case <-churn.Done():
			case <-time.After(2 * time.Second):
			}
			Expect(getMigration(ctx, env.Namespace, "web-apart").ResourceVersion).To(Equal(settled), "a status write under churn")
		}
		Expect(getMigration(ctx, env.Namespace, "web-apart").Status.Phase).To(Equal(pgv1.PhaseSucceeded))
	})
})

var _ = Describe("Day two: the loss of a zone under a zone spread", Label("operator", "day-two"), func() {
	It("predicts that a DoNotSchedule spread with one pod per zone strands the lost zone's pod, as the real scheduler then does", func(ctx SpecContext) {
		env := newEnv(ctx, "d2-zone")
		// The spec's zones are its own: a zone's loss is of every node in it,
		// and other specs' pools run beside this one.
		zoneOf := map[string]string{}
		for _, z := range []string{"a", "b", "c"} {
			for i := range 2 {
				n, err := env.AddNode(ctx, fmt.Sprintf("zone-%s-%d", z, i), map[string]string{utils.ZoneLabel: env.Namespace + "-zone-" + z})
				Expect(err).NotTo(HaveOccurred())
				zoneOf[n] = "zone-" + z
			}
		}
		Expect(k8sClient.Create(ctx, utils.Deployment(env.Namespace, "web", env.Pool(), 3, nil))).To(Succeed())
		allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 3)
		migration(ctx, env.Namespace, "web-zones", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"),
			Constraint: pgv1.Constraint{TopologySpread: &pgv1.TopologySpreadConstraint{TopologyKey: utils.ZoneLabel, MaxSkew: 1}}})
		Eventually(phaseOf(ctx, env.Namespace, "web-zones")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "web-zones"))
		pods := allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 3)
		zones := map[string]int{}
		for _, p := range pods {
			zones[zoneOf[p.Spec.NodeName]]++
		}
		Expect(zones).To(Equal(map[string]int{"zone-a": 1, "zone-b": 1, "zone-c": 1}), utils.Placement(pods))

		By("the verdict: a drain moves a pod within its zone, the loss of zone-a leaves its pod nowhere to go")
		var verdict metav1.Condition
		Eventually(func() metav1.Condition {
			verdict = conditionOf(ctx, env.Namespace, "web-zones", pgv1.ConditionDisruptionReady)
			return verdict
		}).Should(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", pgv1.ReasonZoneLossUnplaceable)))
		Expect(verdict.Message).To(And(ContainSubstring("the loss of "+utils.ZoneLabel+"="+env.Namespace+"-zone-a (2 nodes unreachable"),
			ContainSubstring("set nodeTaintsPolicy Honor")))

		By("zone-a lost for real: its nodes cordoned and its pod gone, the replacement stays Pending on the spread")
		for n, z := range zoneOf {
			if z == "zone-a" {
				_, err := kubectl(ctx, "cordon", n)
				Expect(err).NotTo(HaveOccurred())
			}
		}
		for _, p := range pods {
			if zoneOf[p.Spec.NodeName] == "zone-a" {
				Expect(k8sClient.Delete(ctx, &p, client.GracePeriodSeconds(0))).To(Succeed())
			}
		}
		Eventually(func(g Gomega) {
			now, err := utils.PodsOf(ctx, k8sClient, env.Namespace, map[string]string{"app": "web"})
			g.Expect(err).NotTo(HaveOccurred())
			var why []string
			for _, p := range now {
				if ok, msg := utils.Unschedulable(p); ok {
					why = append(why, msg)
				}
			}
			g.Expect(why).To(ConsistOf(ContainSubstring("didn't match pod topology spread constraints")), utils.Placement(now))
		}).Should(Succeed())
		Eventually(phaseOf(ctx, env.Namespace, "web-zones"), 30*time.Second).Should(Equal(pgv1.PhaseDegraded), explain(ctx, env.Namespace, "web-zones"))
		Expect(conditionOf(ctx, env.Namespace, "web-zones", pgv1.ConditionReady).Reason).To(Equal(pgv1.ReasonConstraintUnsatisfied))

		By("zone-a back: the pod runs there again, and the migration is Succeeded")
		for n, z := range zoneOf {
			if z == "zone-a" {
				_, err := kubectl(ctx, "uncordon", n)
				Expect(err).NotTo(HaveOccurred())
			}
		}
		allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 3)
		Eventually(phaseOf(ctx, env.Namespace, "web-zones"), 30*time.Second).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "web-zones"))
	})
})
