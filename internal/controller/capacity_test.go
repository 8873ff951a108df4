package controller

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/workloadpatch"
)

// A migration waits for the qualifying nodes its constraint needs, patching nothing meanwhile (step 3).
var _ = Describe("Capacity first", func() {
	var fc *fakeCluster
	BeforeEach(func() { fc = newFakeCluster() })

	It("waits for capacity without patching, then applies soft, then hard, and succeeds (incident 000)", func() {
		fc.node("data-1", map[string]string{"role": "data"})
		fc.node("app-1", map[string]string{"role": "app"})
		fc.deployment("search", 1, onRole("data"))
		fc.rollOut("search", "data-1")
		fc.deployment("broker", 1, onRole("app"))
		fc.rollOut("broker", "app-1")
		graph := fc.deployment("graphdb", 1, onRole("data"))
		fc.rollOut("graphdb", "data-1")
		nodeAffinity := graph.Spec.Template.Spec.Affinity.NodeAffinity.DeepCopy()

		fc.migration("graphdb-apart", pgv1.PlacementMigrationSpec{
			Targets:    targetsNamed("graphdb"),
			Constraint: hostnameAntiAffinity(map[string]string{"app": "search"}),
			Capacity:   &pgv1.Capacity{NodeSelector: pgv1.Labels(map[string]string{"role": "data"})},
			Guards: &pgv1.Guards{ProtectedPods: pgv1.SelectorFrom(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"search", "broker"}}}})},
		})

		By("waiting for a second data node, patching nothing")
		Eventually(fc.phase("graphdb-apart")).Should(Equal(pgv1.PhaseWaitingForCapacity), fc.explain("graphdb-apart"))
		Eventually(func() metav1.Condition { return fc.condition("graphdb-apart", pgv1.ConditionCapacityAvailable) }).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Message", ContainSubstring("1 of 2 qualifying nodes (role=data)"))))
		Expect(fc.pm("graphdb-apart").Status.Capacity.Summary).To(Equal("1/2"))
		Expect(fc.kstatus("graphdb-apart")).To(Equal(status.InProgressStatus))
		Consistently(func() int64 { return fc.get("graphdb").Generation }, "1s").Should(Equal(int64(1)))

		By("starting the soft stage as soon as the node joins")
		fc.node("data-2", map[string]string{"role": "data"})
		Eventually(fc.phase("graphdb-apart"), "3s").Should(Equal(pgv1.PhaseApplyingSoft), fc.explain("graphdb-apart"))
		aa := fc.antiAffinityOf("graphdb")
		Expect(aa.RequiredDuringSchedulingIgnoredDuringExecution).To(BeEmpty())
		Expect(aa.PreferredDuringSchedulingIgnoredDuringExecution).To(HaveLen(1))
		Expect(aa.PreferredDuringSchedulingIgnoredDuringExecution[0].Weight).To(Equal(placement.SoftWeight))
		Expect(aa.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.LabelSelector.MatchLabels).To(Equal(map[string]string{"app": "search"}))
		Expect(fc.get("graphdb").Spec.Template.Spec.Affinity.NodeAffinity).To(Equal(nodeAffinity))
		Expect(fc.kstatus("graphdb-apart")).To(Equal(status.InProgressStatus))

		By("owning only the constraint fields, next to the setup's")
		managers := fc.managersOf("graphdb")
		Expect(managers[workloadpatch.FieldManager("graphdb-apart")]).To(ContainSubstring(`"f:podAntiAffinity"`))
		Expect(managers[workloadpatch.FieldManager("graphdb-apart")]).NotTo(ContainSubstring(`"f:nodeAffinity"`))
		Expect(managers[workloadpatch.FieldManager("graphdb-apart")]).NotTo(ContainSubstring(`"f:containers"`))
		Expect(managers[setupOwner]).To(ContainSubstring(`"f:nodeAffinity"`))

		By("moving on to the hard stage once the soft one rolled out")
		fc.rollOut("graphdb", "data-2")
		Eventually(fc.phase("graphdb-apart")).Should(Equal(pgv1.PhaseApplyingHard), fc.explain("graphdb-apart"))
		aa = fc.antiAffinityOf("graphdb")
		Expect(aa.PreferredDuringSchedulingIgnoredDuringExecution).To(BeEmpty(), "soft to hard replaces our soft term")
		Expect(aa.RequiredDuringSchedulingIgnoredDuringExecution).To(HaveLen(1))
		Expect(fc.condition("graphdb-apart", pgv1.ConditionSoftApplied).Status).To(Equal(metav1.ConditionTrue))

		By("succeeding once the hard stage rolled out and holds")
		fc.rollOut("graphdb", "data-2")
		Eventually(fc.phase("graphdb-apart")).Should(Equal(pgv1.PhaseSucceeded), fc.explain("graphdb-apart"))
		pm := fc.pm("graphdb-apart")
		Expect(pm.Status.Stage).To(Equal(pgv1.StageHard))
		Expect(pm.Status.ProtectedPods.Count).To(Equal(int32(2)))
		Expect(fc.condition("graphdb-apart", pgv1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
		Expect(fc.condition("graphdb-apart", pgv1.ConditionHardApplied).Message).To(ContainSubstring("Hard stage rolled out and was verified"))
		Expect(fc.condition("graphdb-apart", pgv1.ConditionReconciling).Type).To(BeEmpty())
		Expect(fc.kstatus("graphdb-apart")).To(Equal(status.CurrentStatus))
		for _, c := range pm.Status.Conditions {
			Expect(c.ObservedGeneration).To(Equal(pm.Generation), c.Type)
		}
		Expect(fc.get("graphdb").Spec.Template.Spec.Affinity.NodeAffinity).To(Equal(nodeAffinity))
		Eventually(fc.eventReasons("graphdb-apart")).Should(ContainElements(
			pgv1.ReasonWaitingForCapacity, pgv1.ReasonStageApplied, pgv1.ReasonSucceeded))

		By("writing no status while nothing changes")
		rv := fc.pm("graphdb-apart").ResourceVersion
		poke(fc, "graphdb-apart")
		poked := fc.pm("graphdb-apart").ResourceVersion
		Expect(poked).NotTo(Equal(rv))
		Consistently(func() string { return fc.pm("graphdb-apart").ResourceVersion }, "1s").Should(Equal(poked))
	})
})
