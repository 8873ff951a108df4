package e2e

import (
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/test/utils"
)

// The ReplicaSet controller chooses the pods a scale-down removes without
// looking at zones: after Ready and pod-deletion-cost it takes the pods
// doubled up on a node, then the most recently Ready. A hard zone spread
// 2/2/2 whose zone-c pods are the youngest, scaled to 3, loses both of
// them: the spread the migration made true ends 2/1/0 (kubernetes#124149).
// With spec.rebalance.mode DeletionCost the operator ranks each zone's pods
// by cost, and the same scale-down ends 1/1/1.
var _ = Describe("A scale-down of a spread Deployment", Label("operator", "rebalance"), func() {
	// readySince is when the pod last turned Ready.
	readySince := func(p corev1.Pod) time.Time {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return c.LastTransitionTime.Time
			}
		}
		return time.Time{}
	}

	// scaleDown spreads web's 6 pods 2/2/2 over one node per zone with a
	// hard zone spread, replaces zone c's two pods so that they are the
	// youngest by far, and scales web to 3; it returns the pods per zone.
	scaleDown := func(ctx SpecContext, mode pgv1.RebalanceMode) map[string]int {
		env := newEnv(ctx, "keep-spread")
		Expect(utils.BindRebalanceRole(ctx, k8sClient, env.Namespace)).To(Succeed())
		d, zones := balancedDeployment(ctx, env, "web", []string{"zone-a", "zone-b", "zone-c"}, 6)
		migration(ctx, env.Namespace, "web-zones", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: zoneSpread("web", 1),
			Rebalance: &pgv1.Rebalance{Mode: mode}})
		Eventually(phaseOf(ctx, env.Namespace, "web-zones"), 3*time.Minute).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "web-zones"))
		pods := allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 6)
		Expect(zones.Count(pods)).To(Equal(map[string]int{"zone-a": 2, "zone-b": 2, "zone-c": 2}))

		By("every pod Ready a while, then zone c's two replaced: the youngest pods are zone c's")
		Eventually(func() time.Duration {
			pods := allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 6)
			latest := time.Time{}
			for _, p := range pods {
				if t := readySince(p); t.After(latest) {
					latest = t
				}
			}
			return time.Since(latest)
		}, time.Minute, time.Second).Should(BeNumerically(">=", 15*time.Second))
		for _, p := range pods {
			if zones.ZoneOf(p.Spec.NodeName) == "zone-c" {
				Expect(k8sClient.Delete(ctx, &p)).To(Succeed())
			}
		}
		Eventually(func(g Gomega) {
			now, err := utils.PodsOf(ctx, k8sClient, env.Namespace, map[string]string{"app": "web"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(now).To(HaveLen(6))
			g.Expect(zones.Count(now)).To(Equal(map[string]int{"zone-a": 2, "zone-b": 2, "zone-c": 2}))
			for _, p := range now {
				g.Expect(utils.Running(p)).To(BeTrue(), utils.Placement(now))
			}
		}).Should(Succeed())
		Expect(waitControllerSeesReady(ctx, d, 6)).To(Succeed())

		if mode == pgv1.RebalanceDeletionCost {
			By("the operator ranks each zone's pods: costs 0 and -1 in every zone")
			Eventually(func(g Gomega) {
				now, err := utils.PodsOf(ctx, k8sClient, env.Namespace, map[string]string{"app": "web"})
				g.Expect(err).NotTo(HaveOccurred())
				costs := map[string][]string{}
				for _, p := range now {
					g.Expect(p.Annotations[placement.DeletionCostMark]).To(Equal(p.Annotations[corev1.PodDeletionCost]), "pod %s carries the cost it was given", p.Name)
					z := zones.ZoneOf(p.Spec.NodeName)
					costs[z] = append(costs[z], p.Annotations[corev1.PodDeletionCost])
				}
				for _, c := range costs {
					slices.Sort(c)
				}
				g.Expect(costs).To(Equal(map[string][]string{"zone-a": {"-1", "0"}, "zone-b": {"-1", "0"}, "zone-c": {"-1", "0"}}))
			}).Should(Succeed())
			Eventually(func() metav1.Condition { return conditionOf(ctx, env.Namespace, "web-zones", pgv1.ConditionBalanced) }).Should(
				And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", pgv1.ReasonDeletionCostsKept)))
		}

		By("scaling web to 3")
		now, err := utils.PodsOf(ctx, k8sClient, env.Namespace, map[string]string{"app": "web"})
		Expect(err).NotTo(HaveOccurred())
		// The controller compares Ready times on a logarithmic scale of
		// their age: when the youngest pod of zones a and b has been Ready
		// twice as long as the oldest of zone c, every zone-c pod is the
		// younger to it, which is what the control rests on.
		latestElsewhere, earliestInC := time.Time{}, time.Now()
		for _, p := range now {
			t := readySince(p)
			switch {
			case zones.ZoneOf(p.Spec.NodeName) != "zone-c":
				if t.After(latestElsewhere) {
					latestElsewhere = t
				}
			case t.Before(earliestInC):
				earliestInC = t
			}
		}
		Expect(time.Since(latestElsewhere)).To(BeNumerically(">", 2*time.Since(earliestInC)+4*time.Second), "zone c's pods are not the youngest by far enough")
		patch := client.MergeFrom(d.DeepCopy())
		d.Spec.Replicas = ptr.To(int32(3))
		Expect(k8sClient.Patch(ctx, d, patch)).To(Succeed())
		var counts map[string]int
		Eventually(func(g Gomega) {
			now, err := utils.PodsOf(ctx, k8sClient, env.Namespace, map[string]string{"app": "web"})
			g.Expect(err).NotTo(HaveOccurred())
			alive := slices.DeleteFunc(now, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
			g.Expect(alive).To(HaveLen(3))
			counts = zones.Count(alive)
		}).Should(Succeed())
		return counts
	}

	It("keeps the spread 1/1/1 with rebalance DeletionCost", func(ctx SpecContext) {
		Expect(scaleDown(ctx, pgv1.RebalanceDeletionCost)).To(Equal(map[string]int{"zone-a": 1, "zone-b": 1, "zone-c": 1}))
	}, NodeTimeout(5*time.Minute))

	It("loses zone c without it: the ReplicaSet removes the youngest pods first (the control)", func(ctx SpecContext) {
		Expect(scaleDown(ctx, pgv1.RebalanceOff)).To(HaveKeyWithValue("zone-c", 0))
	}, NodeTimeout(5*time.Minute))

	It("says which role to bind when the operator may not patch pods, and stays Ready", func(ctx SpecContext) {
		env := newEnv(ctx, "keep-spread-refused")
		balancedDeployment(ctx, env, "web", []string{"zone-a", "zone-b", "zone-c"}, 3)
		migration(ctx, env.Namespace, "web-zones", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: zoneSpread("web", 1),
			Rebalance: &pgv1.Rebalance{Mode: pgv1.RebalanceDeletionCost}})
		Eventually(phaseOf(ctx, env.Namespace, "web-zones"), 3*time.Minute).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "web-zones"))
		Eventually(func() metav1.Condition { return conditionOf(ctx, env.Namespace, "web-zones", pgv1.ConditionBalanced) }).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", pgv1.ReasonDeletionCostRefused),
			HaveField("Message", And(ContainSubstring("forbidden"), ContainSubstring("placement-guard-rebalance"), ContainSubstring("namespace "+env.Namespace)))))
		Expect(conditionOf(ctx, env.Namespace, "web-zones", pgv1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
		pods, err := utils.PodsOf(ctx, k8sClient, env.Namespace, map[string]string{"app": "web"})
		Expect(err).NotTo(HaveOccurred())
		for _, p := range pods {
			Expect(p.Annotations).NotTo(HaveKey(corev1.PodDeletionCost))
		}

		By("the role bound, the costs are written")
		Expect(utils.BindRebalanceRole(ctx, k8sClient, env.Namespace)).To(Succeed())
		Eventually(func() metav1.Condition { return conditionOf(ctx, env.Namespace, "web-zones", pgv1.ConditionBalanced) }, 2*time.Minute).Should(
			HaveField("Reason", pgv1.ReasonDeletionCostsKept))

		By("the role unbound and the migration deleted: it goes, leaving its costs, with a Warning that says how to remove them")
		Expect(k8sClient.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: "placement-guard-" + utils.RebalanceRole}})).To(Succeed())
		Expect(k8sClient.Delete(ctx, getMigration(ctx, env.Namespace, "web-zones"))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: "web-zones"}, &pgv1.PlacementMigration{}))
		}, time.Minute).Should(BeTrue(), "the deleted migration is held")
		pods, err = utils.PodsOf(ctx, k8sClient, env.Namespace, map[string]string{"app": "web"})
		Expect(err).NotTo(HaveOccurred())
		for _, p := range pods {
			Expect(p.Annotations).To(HaveKey(corev1.PodDeletionCost))
		}
		Eventually(func(g Gomega) {
			var list eventsv1.EventList
			g.Expect(k8sClient.List(ctx, &list, client.InNamespace(env.Namespace))).To(Succeed())
			var notes []string
			for _, e := range list.Items {
				if e.Regarding.Name == "web-zones" && e.Reason == pgv1.ReasonDeletionCostRefused && e.Type == corev1.EventTypeWarning {
					notes = append(notes, e.Note)
				}
			}
			g.Expect(notes).To(ContainElement(ContainSubstring("kubectl annotate pods")))
		}).Should(Succeed())
	}, NodeTimeout(5*time.Minute))
})
