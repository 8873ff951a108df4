package controller

import (
	"slices"
	"strconv"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/plugin"
)

var _ = Describe("A succeeded migration that keeps deletion costs", func() {
	var fc *fakeCluster
	BeforeEach(func() { fc = newFakeCluster() })

	// costsByZone are web's pods' deletion costs per zone in string order,
	// "" for none, and "cost!=mark" for a cost that is not its mark.
	costsByZone := func() map[string][]string {
		var pods corev1.PodList
		Expect(k8sClient.List(ctx, &pods, client.InNamespace(fc.ns), client.MatchingLabels{"app": "web"})).To(Succeed())
		out := map[string][]string{}
		for _, p := range pods.Items {
			n := &corev1.Node{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, n)).To(Succeed())
			cost := p.Annotations[corev1.PodDeletionCost]
			if mark := p.Annotations[placement.DeletionCostMark]; mark != cost {
				cost += "!=" + mark
			}
			out[n.Labels[corev1.LabelTopologyZone]] = append(out[n.Labels[corev1.LabelTopologyZone]], cost)
		}
		for _, costs := range out {
			slices.Sort(costs)
		}
		return out
	}
	setCost := func(p *corev1.Pod, cost string) {
		value := "null"
		if cost != "" {
			value = strconv.Quote(cost)
		}
		Expect(k8sClient.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+corev1.PodDeletionCost+`":`+value+`}}}`)))).To(Succeed())
	}
	balanced := func() metav1.Condition { return fc.condition("web-spread", pgv1.ConditionBalanced) }

	// spreadSucceeded spreads web's 4 pods over zones a (two nodes), b and c
	// with a soft zone spread and rebalance mode.
	spreadSucceeded := func(mode pgv1.RebalanceMode) []*corev1.Pod {
		fc.node("a1", map[string]string{corev1.LabelTopologyZone: "a"})
		fc.node("a2", map[string]string{corev1.LabelTopologyZone: "a"})
		fc.node("b1", map[string]string{corev1.LabelTopologyZone: "b"})
		fc.node("c1", map[string]string{corev1.LabelTopologyZone: "c"})
		fc.deployment("web", 4)
		fc.rollOut("web", "a1", "a2", "b1", "c1")
		fc.migration("web-spread", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: zoneSpreadOf(nil),
			FinalStage: pgv1.StageSoft, Rebalance: &pgv1.Rebalance{Mode: mode}})
		Eventually(fc.phase("web-spread")).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain("web-spread"))
		pods := fc.rollOut("web", "a1", "a2", "b1", "c1")
		Eventually(fc.phase("web-spread")).Should(Equal(pgv1.PhaseSucceeded), fc.explain("web-spread"))
		return pods
	}

	It("ranks each zone's pods so that a scale-down takes the most crowded zone first, one write per new pod, and never over someone else's cost", func() {
		pods := spreadSucceeded(pgv1.RebalanceDeletionCost)
		Expect(fc.pm("web-spread").Finalizers).To(ContainElement(pgv1.DeletionCostFinalizer))

		By("two levels in zone a, one in b and c")
		Eventually(costsByZone).Should(Equal(map[string][]string{"a": {"-1", "0"}, "b": {"0"}, "c": {"0"}}))
		Eventually(balanced).Should(HaveField("Status", metav1.ConditionTrue))
		Expect(balanced().Reason).To(Equal(pgv1.ReasonDeletionCostsKept))
		Expect(balanced().Message).To(And(ContainSubstring("measured skew 1 ≤ maxSkew 1 over topology.kubernetes.io/zone (a=2, b=1, c=1)"), ContainSubstring("deletion costs rank 4 pod(s)")))
		Expect(fc.condition("web-spread", pgv1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))

		By("plan, on a snapshot of the cluster, says what the operator keeps, and has nothing left to write")
		snapshot, err := plugin.ReadClusterDir(writeSnapshot([]string{fc.ns}))
		Expect(err).NotTo(HaveOccurred())
		report, err := plugin.Plan(snapshot, fc.pm("web-spread"))
		Expect(err).NotTo(HaveOccurred())
		Expect(report.Costs).NotTo(BeNil())
		Expect(report.Costs.Summary).To(Equal(balanced().Message))
		Expect(report.Costs.Writes).To(BeEmpty())

		By("a pod added in zone b takes the next level there; no other pod is written")
		versions := map[string]string{}
		for _, p := range pods {
			live := &corev1.Pod{}
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), live)).To(Succeed())
			versions[p.Name] = live.ResourceVersion
		}
		added := fc.pod(fc.replicaSet(fc.get("web")), fc.ns+"-b1", readyPod)
		Eventually(costsByZone).Should(Equal(map[string][]string{"a": {"-1", "0"}, "b": {"-1", "0"}, "c": {"0"}}))
		for _, p := range pods {
			live := &corev1.Pod{}
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), live)).To(Succeed())
			Expect(live.ResourceVersion).To(Equal(versions[p.Name]), "pod %s was written again", p.Name)
		}

		By("a cost someone else writes: the ranking is left to them, and the condition says so")
		setCost(added, "9")
		Eventually(balanced).Should(HaveField("Reason", pgv1.ReasonForeignDeletionCost))
		Expect(balanced().Status).To(Equal(metav1.ConditionFalse))
		Expect(balanced().Message).To(ContainSubstring("pod " + added.Name + " carries a pod-deletion-cost placement-guard did not write"))
		Eventually(fc.eventReasons("web-spread")).Should(ContainElement(pgv1.ReasonForeignDeletionCost))
		Consistently(costsByZone, "1s").Should(HaveKeyWithValue("b", ConsistOf("0", "9!=-1")))

		By("their cost removed, the pod is ranked again")
		setCost(added, "")
		Eventually(balanced).Should(HaveField("Reason", pgv1.ReasonDeletionCostsKept))
		Eventually(costsByZone).Should(HaveKeyWithValue("b", ConsistOf("0", "-1")))

		By("mode Off: every cost comes off, then the finalizer and the condition")
		editSpec(fc, "web-spread", func(s *pgv1.PlacementMigrationSpec) { s.Rebalance.Mode = pgv1.RebalanceOff })
		Eventually(costsByZone).Should(Equal(map[string][]string{"a": {"", ""}, "b": {"", ""}, "c": {""}}))
		Eventually(func() []string { return fc.pm("web-spread").Finalizers }).ShouldNot(ContainElement(pgv1.DeletionCostFinalizer))
		Eventually(func() *metav1.Condition {
			return apimeta.FindStatusCondition(fc.pm("web-spread").Status.Conditions, pgv1.ConditionBalanced)
		}).Should(BeNil())
		Expect(fc.phase("web-spread")()).To(Equal(pgv1.PhaseSucceeded))
	})

	It("takes its costs off before it lets a deleted migration go, leaving costs it did not write", func() {
		spreadSucceeded(pgv1.RebalanceDeletionCost)
		Eventually(costsByZone).Should(Equal(map[string][]string{"a": {"-1", "0"}, "b": {"0"}, "c": {"0"}}))
		By("a pod of another workload with a cost of its own")
		other := fc.pod(fc.replicaSet(fc.deployment("other", 1)), fc.ns+"-c1", readyPod)
		setCost(other, "-4")
		Expect(k8sClient.Delete(ctx, fc.pm("web-spread"))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: fc.ns, Name: "web-spread"}, &pgv1.PlacementMigration{}))
		}).Should(BeTrue(), "the migration is gone")
		Expect(costsByZone()).To(Equal(map[string][]string{"a": {"", ""}, "b": {""}, "c": {""}}))
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(other), other)).To(Succeed())
		Expect(other.Annotations).To(HaveKeyWithValue(corev1.PodDeletionCost, "-4"))
	})

	It("leaves a Deployment's ranking to the older of two migrations that keep costs on it", func() {
		spreadSucceeded(pgv1.RebalanceDeletionCost)
		Eventually(costsByZone).Should(Equal(map[string][]string{"a": {"-1", "0"}, "b": {"0"}, "c": {"0"}}))

		By("a younger migration of the same Deployment, on another key, keeping costs too")
		// Creation times have a grain of a second; a tie goes to the name
		// first in order, which this one is not either.
		fc.migration("web-zz-hosts", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameAntiAffinity(nil),
			FinalStage: pgv1.StageSoft, Rebalance: &pgv1.Rebalance{Mode: pgv1.RebalanceDeletionCost}})
		Eventually(fc.phase("web-zz-hosts")).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain("web-zz-hosts"))
		fc.rollOut("web", "a1", "a2", "b1", "c1")
		Eventually(fc.phase("web-zz-hosts")).Should(Equal(pgv1.PhaseSucceeded), fc.explain("web-zz-hosts"))
		Eventually(func() metav1.Condition { return fc.condition("web-zz-hosts", pgv1.ConditionBalanced) }).Should(
			HaveField("Message", ContainSubstring("its pods are ranked by PlacementMigration web-spread")))

		By("the older one's zone ranking holds, never rewritten by the younger's hostname ranking")
		Eventually(costsByZone).Should(Equal(map[string][]string{"a": {"-1", "0"}, "b": {"0"}, "c": {"0"}}))
		Consistently(costsByZone, "2s").Should(Equal(map[string][]string{"a": {"-1", "0"}, "b": {"0"}, "c": {"0"}}))
	})

	It("writes nothing with rebalance Off", func() {
		spreadSucceeded(pgv1.RebalanceOff)
		poke(fc, "web-spread")
		Consistently(costsByZone, "1s").Should(Equal(map[string][]string{"a": {"", ""}, "b": {""}, "c": {""}}))
		Expect(fc.pm("web-spread").Finalizers).NotTo(ContainElement(pgv1.DeletionCostFinalizer))
		Expect(apimeta.FindStatusCondition(fc.pm("web-spread").Status.Conditions, pgv1.ConditionBalanced)).To(BeNil())
	})
})
