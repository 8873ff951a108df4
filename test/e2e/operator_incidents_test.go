package e2e

import (
	"encoding/json"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/test/utils"
)

func getDeployment(ctx SpecContext, namespace, name string) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, d)).To(Succeed())
	return d
}

// updateDeployment changes a Deployment as a person retrying kubectl edit
// would: the Deployment controller writes its status throughout a
// rollout, and each status write makes a read copy stale.
func updateDeployment(ctx SpecContext, namespace, name string, change func(*appsv1.Deployment)) {
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d := getDeployment(ctx, namespace, name)
		change(d)
		return k8sClient.Update(ctx, d)
	})).To(Succeed())
}

func distinctNodes(pods []corev1.Pod) int {
	nodes := map[string]bool{}
	for _, p := range pods {
		nodes[p.Spec.NodeName] = true
	}
	return len(nodes)
}

var _ = Describe("Incident 001 with placement-guard: hard anti-affinity with replicas == nodes", Label("operator", "incident-001"), func() {
	It("refuses the deadlocking rollout, and proceeds once the strategy replaces pods in place", func(ctx SpecContext) {
		env := newEnv(ctx, "i001")
		for _, n := range []string{"node-0", "node-1"} {
			_, err := env.AddNode(ctx, n, nil)
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(k8sClient.Create(ctx, utils.Deployment(env.Namespace, "web", env.Pool(), 2, nil))).To(Succeed())
		allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 2)
		migration(ctx, env.Namespace, "web-apart", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameApart(nil)})

		Eventually(phaseOf(ctx, env.Namespace, "web-apart")).Should(Equal(pgv1.PhaseBlocked), explain(ctx, env.Namespace, "web-apart"))
		feasible := conditionOf(ctx, env.Namespace, "web-apart", pgv1.ConditionFeasible)
		Expect(feasible.Reason).To(Equal("RolloutDeadlock"))
		Expect(feasible.Message).To(ContainSubstring("maxUnavailable"))
		Expect(getDeployment(ctx, env.Namespace, "web").Generation).To(Equal(int64(1)), "nothing is patched while Blocked")

		By("the user lets the rollout replace one pod at a time")
		web := getDeployment(ctx, env.Namespace, "web")
		patch := client.MergeFrom(web.DeepCopy())
		web.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromInt32(1))}
		Expect(k8sClient.Patch(ctx, web, patch)).To(Succeed())
		Eventually(phaseOf(ctx, env.Namespace, "web-apart")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "web-apart"))
		Expect(distinctNodes(allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 2))).To(Equal(2))

		By("a later image change rolls out under the hard constraint")
		web = getDeployment(ctx, env.Namespace, "web")
		patch = client.MergeFrom(web.DeepCopy())
		web.Spec.Template.Spec.Containers[0].Image = "registry.invalid/web:2"
		Expect(k8sClient.Patch(ctx, web, patch)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, utils.ObjectKey(web), web)).To(Succeed())
			g.Expect(utils.RolledOut(web)).To(BeTrue())
		}).Should(Succeed())
		pods := allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 2)
		Expect(distinctNodes(pods)).To(Equal(2))
		for _, p := range pods {
			Expect(p.Spec.Containers[0].Image).To(Equal("registry.invalid/web:2"))
		}
	})
})

var _ = Describe("Incident 002 with placement-guard: a spread selector matching blue and green", Label("operator", "incident-002"), func() {
	It("reports the overlap, and spreads green over the zones once matchLabelKeys scopes it", func(ctx SpecContext) {
		env := newEnv(ctx, "i002")
		zoneOf := map[string]string{}
		nodeA, err := env.AddNode(ctx, "zone-a", map[string]string{utils.ZoneLabel: "zone-a"})
		Expect(err).NotTo(HaveOccurred())
		zoneOf[nodeA] = "zone-a"
		for _, release := range []string{"blue", "green"} {
			Expect(k8sClient.Create(ctx, utils.Deployment(env.Namespace, "my-app-"+release, env.Pool(), 2,
				map[string]string{"app": "my_app", "release": release}))).To(Succeed())
		}
		allRunning(ctx, env.Namespace, map[string]string{"app": "my_app"}, 4)
		nodeB, err := env.AddNode(ctx, "zone-b", map[string]string{utils.ZoneLabel: "zone-b"})
		Expect(err).NotTo(HaveOccurred())
		zoneOf[nodeB] = "zone-b"

		migration(ctx, env.Namespace, "green-zones", pgv1.PlacementMigrationSpec{
			Targets: targetsNamed("my-app-green"),
			Constraint: pgv1.Constraint{TopologySpread: &pgv1.TopologySpreadConstraint{
				TopologyKey: utils.ZoneLabel, MaxSkew: 1,
				LabelSelector: pgv1.Labels(map[string]string{"app": "my_app"}),
			}},
		})
		Eventually(phaseOf(ctx, env.Namespace, "green-zones")).Should(Equal(pgv1.PhaseBlocked), explain(ctx, env.Namespace, "green-zones"))
		feasible := conditionOf(ctx, env.Namespace, "green-zones", pgv1.ConditionFeasible)
		Expect(feasible.Reason).To(Equal("SelectorOverlap"))
		Expect(feasible.Message).To(ContainSubstring("matchLabelKeys: [pod-template-hash]"))

		By("scoping the spread to one revision with matchLabelKeys")
		pm := getMigration(ctx, env.Namespace, "green-zones")
		patch := client.MergeFrom(pm.DeepCopy())
		pm.Spec.Constraint.TopologySpread.MatchLabelKeys = []string{appsv1.DefaultDeploymentUniqueLabelKey}
		Expect(k8sClient.Patch(ctx, pm, patch)).To(Succeed())
		Eventually(phaseOf(ctx, env.Namespace, "green-zones")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "green-zones"))

		green := allRunning(ctx, env.Namespace, map[string]string{"release": "green"}, 2)
		zones := map[string]bool{}
		for _, p := range green {
			zones[zoneOf[p.Spec.NodeName]] = true
		}
		Expect(zones).To(HaveLen(2), utils.Placement(green))
		spread := getDeployment(ctx, env.Namespace, "my-app-green").Spec.Template.Spec.TopologySpreadConstraints
		Expect(spread).To(HaveLen(1))
		Expect(spread[0].WhenUnsatisfiable).To(Equal(corev1.DoNotSchedule))
	})
})

var _ = Describe("Incident 004 with placement-guard: single-replica controllers stacked on one worker", Label("operator", "incident-004"), func() {
	It("spreads them softly over the workers and leaves an existing node affinity byte for byte", func(ctx SpecContext) {
		env := newEnv(ctx, "i004")
		_, err := env.AddNode(ctx, "worker-1", nil)
		Expect(err).NotTo(HaveOccurred())
		partOf := map[string]string{"app.kubernetes.io/part-of": "flux"}
		names := []string{"source-controller", "kustomize-controller", "helm-controller", "notification-controller"}
		for _, name := range names {
			d := utils.Deployment(env.Namespace, name, env.Pool(), 1, partOf)
			if name == "source-controller" {
				d.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 7, Preference: corev1.NodeSelectorTerm{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "node.example/storage", Operator: corev1.NodeSelectorOpExists}}}}},
				}}
			}
			Expect(k8sClient.Create(ctx, d)).To(Succeed())
		}
		allRunning(ctx, env.Namespace, partOf, 4)
		nodeAffinityBefore, err := json.Marshal(getDeployment(ctx, env.Namespace, "source-controller").Spec.Template.Spec.Affinity.NodeAffinity)
		Expect(err).NotTo(HaveOccurred())
		for i := 2; i <= 3; i++ {
			_, err := env.AddNode(ctx, fmt.Sprintf("worker-%d", i), nil)
			Expect(err).NotTo(HaveOccurred())
		}

		migration(ctx, env.Namespace, "flux-spread", pgv1.PlacementMigrationSpec{
			TargetSelector: &pgv1.TargetSelector{Kinds: []pgv1.WorkloadKind{pgv1.KindDeployment}, Selector: *pgv1.Labels(partOf)},
			Constraint: pgv1.Constraint{TopologySpread: &pgv1.TopologySpreadConstraint{
				TopologyKey: corev1.LabelHostname, MaxSkew: 1, LabelSelector: pgv1.Labels(partOf),
			}},
			FinalStage: pgv1.StageSoft,
		})
		Eventually(phaseOf(ctx, env.Namespace, "flux-spread")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "flux-spread"))
		pm := getMigration(ctx, env.Namespace, "flux-spread")
		Expect(pm.Status.Targets).To(HaveLen(4))
		Expect(pm.Status.Stage).To(Equal(pgv1.StageSoft))

		pods := allRunning(ctx, env.Namespace, partOf, 4)
		perNode := map[string]int{}
		for _, p := range pods {
			perNode[p.Spec.NodeName]++
		}
		Expect(len(perNode)).To(BeNumerically(">=", 2), utils.Placement(pods))
		for node, n := range perNode {
			Expect(n).To(BeNumerically("<=", 2), "%s holds %d: %s", node, n, utils.Placement(pods))
		}
		for _, name := range names {
			spread := getDeployment(ctx, env.Namespace, name).Spec.Template.Spec.TopologySpreadConstraints
			Expect(spread).To(HaveLen(1), name)
			Expect(spread[0].WhenUnsatisfiable).To(Equal(corev1.ScheduleAnyway), name)
		}
		nodeAffinityAfter, err := json.Marshal(getDeployment(ctx, env.Namespace, "source-controller").Spec.Template.Spec.Affinity.NodeAffinity)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(nodeAffinityAfter)).To(Equal(string(nodeAffinityBefore)))
	})
})

var _ = Describe("placement-guard rolls a stalled hard stage back", Label("operator", "rollback"), func() {
	It("restores the soft stage when the capacity the hard stage needs is cordoned, leaving no pod Pending", func(ctx SpecContext) {
		env := newEnv(ctx, "rollback")
		for _, n := range []string{"node-0", "node-1", "node-2"} {
			_, err := env.AddNode(ctx, n, nil)
			Expect(err).NotTo(HaveOccurred())
		}
		web := utils.Deployment(env.Namespace, "web", env.Pool(), 2, nil)
		// Each new pod must stay Ready this long before the rollout goes
		// on: the window in which the spec takes capacity away.
		web.Spec.MinReadySeconds = 10
		Expect(k8sClient.Create(ctx, web)).To(Succeed())
		allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 2)
		migration(ctx, env.Namespace, "web-apart", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameApart(nil)})

		By("waiting until the hard stage's first pod is bound")
		var softPod corev1.Pod
		Eventually(func(g Gomega) {
			g.Expect(getMigration(ctx, env.Namespace, "web-apart").Status.Phase).To(Equal(pgv1.PhaseApplyingHard))
			pods, err := utils.PodsOf(ctx, k8sClient, env.Namespace, map[string]string{"app": "web"})
			g.Expect(err).NotTo(HaveOccurred())
			hardBound, soft := false, []corev1.Pod{}
			for _, p := range pods {
				if len(p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
					hardBound = hardBound || p.Spec.NodeName != ""
				} else {
					soft = append(soft, p)
				}
			}
			g.Expect(hardBound).To(BeTrue(), utils.Placement(pods))
			g.Expect(soft).To(HaveLen(2), utils.Placement(pods))
			softPod = soft[0]
		}).Should(Succeed(), explain(ctx, env.Namespace, "web-apart"))

		By("cordoning the node the hard stage's next pod needs")
		// The rollout removes this soft pod first (lowest deletion cost), and
		// its node is the only one the next hard pod could use: cordoned, the
		// hard stage stalls, while the soft pods still fit beside each other.
		patch := client.MergeFrom(softPod.DeepCopy())
		softPod.Annotations = map[string]string{"controller.kubernetes.io/pod-deletion-cost": "-1000"}
		Expect(k8sClient.Patch(ctx, &softPod, patch)).To(Succeed())
		Expect(cluster.CordonNode(ctx, softPod.Spec.NodeName)).To(Succeed())
		Eventually(phaseOf(ctx, env.Namespace, "web-apart")).Should(Equal(pgv1.PhaseRolledBack), explain(ctx, env.Namespace, "web-apart"))
		stalled := conditionOf(ctx, env.Namespace, "web-apart", pgv1.ConditionStalled)
		Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
		Expect(stalled.Reason).To(Equal(pgv1.ReasonPodsUnschedulable))
		Expect(conditionOf(ctx, env.Namespace, "web-apart", pgv1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))

		By("the soft constraint is back and no pod remains Pending")
		aa := getDeployment(ctx, env.Namespace, "web").Spec.Template.Spec.Affinity.PodAntiAffinity
		Expect(aa.RequiredDuringSchedulingIgnoredDuringExecution).To(BeEmpty())
		Expect(aa.PreferredDuringSchedulingIgnoredDuringExecution).To(HaveLen(1))
		Eventually(func(g Gomega) {
			d := getDeployment(ctx, env.Namespace, "web")
			g.Expect(utils.RolledOut(d)).To(BeTrue())
			pods, err := utils.PodsOf(ctx, k8sClient, env.Namespace, map[string]string{"app": "web"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods).To(HaveLen(2), utils.Placement(pods))
			for _, p := range pods {
				g.Expect(utils.Running(p)).To(BeTrue(), utils.Placement(pods))
			}
		}).Should(Succeed())
	})
})

var _ = Describe("placement-guard watches for drift after success", Label("operator", "drift"), func() {
	It("names the field manager whose apply removed the constraint", func(ctx SpecContext) {
		env := newEnv(ctx, "drift")
		for _, n := range []string{"node-0", "node-1"} {
			_, err := env.AddNode(ctx, n, nil)
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(k8sClient.Create(ctx, utils.Deployment(env.Namespace, "web", env.Pool(), 2, nil))).To(Succeed())
		allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 2)
		migration(ctx, env.Namespace, "web-apart", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameApart(nil), FinalStage: pgv1.StageSoft})
		Eventually(phaseOf(ctx, env.Namespace, "web-apart")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "web-apart"))
		Expect(conditionOf(ctx, env.Namespace, "web-apart", pgv1.ConditionConstraintInSync).Status).To(Equal(metav1.ConditionTrue))

		By("a GitOps sync applies the chart's own anti-affinity, forcing ownership")
		term := corev1ac.WeightedPodAffinityTerm().WithWeight(5).WithPodAffinityTerm(corev1ac.PodAffinityTerm().
			WithTopologyKey(utils.ZoneLabel).WithLabelSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{"app": "web"})))
		podSpec := corev1ac.PodSpec().WithAffinity(corev1ac.Affinity().WithPodAntiAffinity(
			corev1ac.PodAntiAffinity().WithPreferredDuringSchedulingIgnoredDuringExecution(term)))
		chart := appsv1ac.Deployment("web", env.Namespace).WithSpec(appsv1ac.DeploymentSpec().WithTemplate(corev1ac.PodTemplateSpec().WithSpec(podSpec)))
		Expect(k8sClient.Apply(ctx, chart, client.FieldOwner("argocd-controller"), client.ForceOwnership)).To(Succeed())

		Eventually(func() metav1.Condition {
			return conditionOf(ctx, env.Namespace, "web-apart", pgv1.ConditionConstraintInSync)
		}).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", pgv1.ReasonDrifted),
			HaveField("Message", ContainSubstring(`field manager "argocd-controller"`))), explain(ctx, env.Namespace, "web-apart"))

		By("never taking the field back by force")
		Eventually(phaseOf(ctx, env.Namespace, "web-apart"), 30*time.Second).Should(Equal(pgv1.PhaseBlocked), explain(ctx, env.Namespace, "web-apart"))
		Expect(conditionOf(ctx, env.Namespace, "web-apart", pgv1.ConditionConstraintInSync).Message).To(ContainSubstring("argocd-controller"))
		aa := getDeployment(ctx, env.Namespace, "web").Spec.Template.Spec.Affinity.PodAntiAffinity
		Expect(aa.PreferredDuringSchedulingIgnoredDuringExecution).To(HaveLen(1))
		Expect(aa.PreferredDuringSchedulingIgnoredDuringExecution[0].Weight).To(Equal(int32(5)))
	})
})
