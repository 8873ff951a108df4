package controller

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/workloadpatch"
)

func onRole(role string) func(*appsv1.Deployment) {
	return func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "role", Operator: corev1.NodeSelectorOpIn, Values: []string{role}}},
			}}},
		}}
	}
}

func withLabels(labels map[string]string) func(*appsv1.Deployment) {
	return func(d *appsv1.Deployment) {
		d.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
		d.Spec.Template.Labels = labels
	}
}

// poke makes the reconciler look again, as any edit of the object would.
func poke(fc *fakeCluster, name string) {
	pm := fc.pm(name)
	patch := client.MergeFrom(pm.DeepCopy())
	if pm.Annotations == nil {
		pm.Annotations = map[string]string{}
	}
	pm.Annotations["spec.example/poked"] = time.Now().Format(time.RFC3339Nano)
	Expect(k8sClient.Patch(ctx, pm, patch)).To(Succeed())
}

func editSpec(fc *fakeCluster, name string, edit func(*pgv1.PlacementMigrationSpec)) {
	pm := fc.pm(name)
	patch := client.MergeFrom(pm.DeepCopy())
	edit(&pm.Spec)
	Expect(k8sClient.Patch(ctx, pm, patch)).To(Succeed())
}

var _ = Describe("PlacementMigration reconciler", func() {
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

	It("blocks a hard anti-affinity the default rollout cannot complete, and resumes once the strategy can (incident 001)", func() {
		fc.node("n1", nil)
		fc.node("n2", nil)
		fc.deployment("web", 2)
		fc.rollOut("web", "n1", "n2")
		fc.migration("web-apart", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameAntiAffinity(nil)})

		Eventually(fc.phase("web-apart")).Should(Equal(pgv1.PhaseBlocked), fc.explain("web-apart"))
		feasible := fc.condition("web-apart", pgv1.ConditionFeasible)
		Expect(feasible.Status).To(Equal(metav1.ConditionFalse))
		Expect(feasible.Reason).To(Equal(placement.HazardRolloutDeadlock))
		Expect(feasible.Message).To(ContainSubstring("maxUnavailable"))
		Expect(fc.condition("web-apart", pgv1.ConditionStalled).Status).To(Equal(metav1.ConditionTrue))
		Expect(fc.condition("web-apart", pgv1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
		Expect(fc.kstatus("web-apart")).To(Equal(status.FailedStatus))
		Expect(fc.pm("web-apart").Status.Hazards).To(ContainElement(HaveField("Type", placement.HazardRolloutDeadlock)))
		Expect(fc.get("web").Generation).To(Equal(int64(1)), "nothing is patched while Blocked")
		Eventually(fc.eventReasons("web-apart")).Should(ContainElement(placement.HazardRolloutDeadlock))

		By("resuming by itself when the user lets the rollout replace a pod in place")
		d := fc.get("web")
		patch := client.MergeFrom(d.DeepCopy())
		d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: ptrTo(intstr.FromInt32(0)), MaxUnavailable: ptrTo(intstr.FromInt32(1))}
		Expect(k8sClient.Patch(ctx, d, patch, client.FieldOwner(setupOwner))).To(Succeed())
		Eventually(fc.phase("web-apart")).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain("web-apart"))
		Expect(fc.condition("web-apart", pgv1.ConditionFeasible).Status).To(Equal(metav1.ConditionTrue))
		Expect(fc.condition("web-apart", pgv1.ConditionStalled).Type).To(BeEmpty())
	})

	It("blocks a spread whose selector counts another release's pods, and proceeds with matchLabelKeys (incident 002)", func() {
		fc.node("a1", map[string]string{corev1.LabelTopologyZone: "a"})
		fc.node("b1", map[string]string{corev1.LabelTopologyZone: "b"})
		fc.deployment("web-blue", 2, withLabels(map[string]string{"app": "web", "color": "blue"}))
		fc.rollOut("web-blue", "a1", "a1")
		fc.deployment("web-green", 2, withLabels(map[string]string{"app": "web", "color": "green"}))
		fc.rollOut("web-green", "a1", "a1")
		fc.migration("web-zones", pgv1.PlacementMigrationSpec{
			Targets: targetsNamed("web-green"),
			Constraint: pgv1.Constraint{TopologySpread: &pgv1.TopologySpreadConstraint{
				TopologyKey: corev1.LabelTopologyZone, MaxSkew: 1,
				LabelSelector: pgv1.Labels(map[string]string{"app": "web"}),
			}},
		})

		Eventually(fc.phase("web-zones")).Should(Equal(pgv1.PhaseBlocked), fc.explain("web-zones"))
		feasible := fc.condition("web-zones", pgv1.ConditionFeasible)
		Expect(feasible.Reason).To(Equal(placement.HazardSelectorOverlap))
		Expect(feasible.Message).To(ContainSubstring("pod-template-hash"))
		Expect(fc.get("web-green").Generation).To(Equal(int64(1)))

		editSpec(fc, "web-zones", func(s *pgv1.PlacementMigrationSpec) {
			s.Constraint.TopologySpread.MatchLabelKeys = []string{appsv1.DefaultDeploymentUniqueLabelKey}
		})
		Eventually(fc.phase("web-zones")).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain("web-zones"))
		spread := fc.get("web-green").Spec.Template.Spec.TopologySpreadConstraints
		Expect(spread).To(HaveLen(1))
		Expect(spread[0].WhenUnsatisfiable).To(Equal(corev1.ScheduleAnyway))
		Expect(spread[0].MatchLabelKeys).To(Equal([]string{appsv1.DefaultDeploymentUniqueLabelKey}))
	})

	It("blocks a soft stage that would take over anti-affinity terms of the workload's own", func() {
		fc.node("n1", nil)
		fc.node("n2", nil)
		fc.deployment("cache", 1, func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 10, PodAffinityTerm: corev1.PodAffinityTerm{
					TopologyKey: corev1.LabelTopologyZone, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}},
			}}
		})
		fc.rollOut("cache", "n1")
		fc.migration("cache-apart", pgv1.PlacementMigrationSpec{Targets: targetsNamed("cache"), Constraint: hostnameAntiAffinity(map[string]string{"app": "web"})})

		Eventually(fc.phase("cache-apart")).Should(Equal(pgv1.PhaseBlocked), fc.explain("cache-apart"))
		Expect(fc.condition("cache-apart", pgv1.ConditionFeasible).Reason).To(Equal(placement.HazardAffinityClobber))
		Expect(fc.condition("cache-apart", pgv1.ConditionReady).Message).To(ContainSubstring("add the term where cache is defined"))
		Expect(fc.condition("cache-apart", pgv1.ConditionReady).Message).To(ContainSubstring(`written by field manager "` + setupOwner + `"`))
		Expect(fc.get("cache").Generation).To(Equal(int64(1)))
	})

	It("blocks a spread that would move pods whose volumes pin them to a zone", func() {
		fc.node("a1", map[string]string{corev1.LabelTopologyZone: "a"})
		fc.node("c1", map[string]string{corev1.LabelTopologyZone: "c"})
		fc.pinnedStatefulSet("db", 2, "c", fc.ns+"-c1")
		fc.migration("db-zones", pgv1.PlacementMigrationSpec{
			Targets:    []pgv1.TargetRef{{Kind: pgv1.KindStatefulSet, Name: "db"}},
			Constraint: pgv1.Constraint{TopologySpread: &pgv1.TopologySpreadConstraint{TopologyKey: corev1.LabelTopologyZone, MaxSkew: 1}},
		})

		Eventually(fc.phase("db-zones")).Should(Equal(pgv1.PhaseBlocked), fc.explain("db-zones"))
		feasible := fc.condition("db-zones", pgv1.ConditionFeasible)
		Expect(feasible.Reason).To(Equal(placement.HazardVolumeZonePinning))
		Expect(feasible.Message).To(ContainSubstring("pinned by its bound volume"))
		s := &appsv1.StatefulSet{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: fc.ns, Name: "db"}, s)).To(Succeed())
		Expect(s.Generation).To(Equal(int64(1)))
	})

	It("blocks a migration whose target does not exist, naming it", func() {
		fc.migration("ghost", pgv1.PlacementMigrationSpec{Targets: targetsNamed("ghost"), Constraint: hostnameAntiAffinity(nil)})
		Eventually(fc.phase("ghost")).Should(Equal(pgv1.PhaseBlocked), fc.explain("ghost"))
		ready := fc.condition("ghost", pgv1.ConditionReady)
		Expect(ready.Reason).To(Equal(pgv1.ReasonTargetNotFound))
		Expect(ready.Message).To(ContainSubstring("Deployment/ghost not found in namespace " + fc.ns))
	})

	It("plans a dry run without patching, and applies when the dry run is turned off", func() {
		fc.node("n1", nil)
		fc.node("n2", nil)
		fc.node("n3", nil)
		fc.deployment("web", 2)
		pods := fc.rollOut("web", "n1", "n1")
		fc.migration("web-plan", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameAntiAffinity(nil), DryRun: true})

		Eventually(fc.phase("web-plan")).Should(Equal(pgv1.PhasePlanned), fc.explain("web-plan"))
		pm := fc.pm("web-plan")
		Expect(pm.Status.Plan).To(HaveLen(1))
		Expect(pm.Status.Plan[0].Stage).To(Equal(pgv1.StageSoft))
		Expect(pm.Status.Plan[0].Change).To(ContainSubstring("adds"))
		Expect(pm.Status.Plan[0].Recreates).To(ConsistOf(pods[0].Name, pods[1].Name))
		Expect(pm.Status.Plan[0].RecreatesCount).To(Equal(int32(2)))
		Expect(fc.condition("web-plan", pgv1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
		Expect(fc.kstatus("web-plan")).To(Equal(status.CurrentStatus))
		Expect(fc.get("web").Generation).To(Equal(int64(1)))
		Expect(fc.managersOf("web")).NotTo(HaveKey(workloadpatch.FieldManager("web-plan")))

		editSpec(fc, "web-plan", func(s *pgv1.PlacementMigrationSpec) { s.DryRun = false })
		Eventually(fc.phase("web-plan")).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain("web-plan"))
		Expect(fc.get("web").Generation).To(Equal(int64(2)))
	})

	It("holds a paused migration without patching, reporting it as still in progress", func() {
		fc.webWithRoomToSpread()
		fc.migration("web-paused", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameAntiAffinity(nil), Paused: true})

		Eventually(fc.phase("web-paused")).Should(Equal(pgv1.PhasePaused), fc.explain("web-paused"))
		Expect(fc.condition("web-paused", pgv1.ConditionReconciling).Status).To(Equal(metav1.ConditionTrue))
		Expect(fc.kstatus("web-paused")).To(Equal(status.InProgressStatus))
		Expect(fc.get("web").Generation).To(Equal(int64(1)))

		editSpec(fc, "web-paused", func(s *pgv1.PlacementMigrationSpec) { s.Paused = false })
		Eventually(fc.phase("web-paused")).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain("web-paused"))
	})

	It("waits for target pods to be Ready and old enough before a stage", func() {
		fc.webWithRoomToSpread()
		fc.migration("web-young", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameAntiAffinity(nil),
			Guards: &pgv1.Guards{MinPodAge: &metav1.Duration{Duration: time.Hour}}})

		Eventually(fc.phase("web-young")).Should(Equal(pgv1.PhasePending), fc.explain("web-young"))
		stable := fc.condition("web-young", pgv1.ConditionPodsStable)
		Expect(stable.Status).To(Equal(metav1.ConditionFalse))
		Expect(stable.Message).To(And(ContainSubstring("is stable at"), ContainSubstring("guards.minPodAge 1h0m0s")))
		Expect(fc.get("web").Generation).To(Equal(int64(1)))

		editSpec(fc, "web-young", func(s *pgv1.PlacementMigrationSpec) { s.Guards.MinPodAge = &metav1.Duration{} })
		Eventually(fc.phase("web-young")).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain("web-young"))
	})

	It("reverts the constraint through its finalizer when deleted with onDelete Revert", func() {
		fc.webWithRoomToSpread()
		fc.migration("web-revert", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameAntiAffinity(nil), OnDelete: pgv1.DeletionRevert})
		Eventually(fc.phase("web-revert")).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain("web-revert"))
		Expect(fc.pm("web-revert").Finalizers).To(ContainElement(pgv1.RevertFinalizer))
		Expect(fc.antiAffinityOf("web").PreferredDuringSchedulingIgnoredDuringExecution).To(HaveLen(1))

		Expect(k8sClient.Delete(ctx, fc.pm("web-revert"))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: fc.ns, Name: "web-revert"}, &pgv1.PlacementMigration{}))
		}).Should(BeTrue())
		Expect(fc.antiAffinityOf("web")).To(BeNil())
	})

	It("leaves the constraint in place when deleted with onDelete Retain, without a finalizer", func() {
		fc.webWithRoomToSpread()
		fc.migration("web-retain", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameAntiAffinity(nil)})
		Eventually(fc.phase("web-retain")).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain("web-retain"))
		Expect(fc.pm("web-retain").Finalizers).To(BeEmpty())

		Expect(k8sClient.Delete(ctx, fc.pm("web-retain"))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: fc.ns, Name: "web-retain"}, &pgv1.PlacementMigration{}))
		}).Should(BeTrue())
		Expect(fc.antiAffinityOf("web").PreferredDuringSchedulingIgnoredDuringExecution).To(HaveLen(1))
	})

	It("rolls the hard stage back to soft when a pod stays Pending because of it", func() {
		fc.node("n1", nil)
		fc.node("n2", nil)
		fc.node("n3", nil)
		fc.deployment("web", 2)
		fc.rollOut("web", "n1", "n2")
		fc.migration("web-apart", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameAntiAffinity(nil)})
		Eventually(fc.phase("web-apart")).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain("web-apart"))
		fc.rollOut("web", "n1", "n2")
		Eventually(fc.phase("web-apart")).Should(Equal(pgv1.PhaseApplyingHard), fc.explain("web-apart"))

		By("a surge pod Pending while the third node has room: the engine places it, so the hard term is not blamed")
		fc.pendingPod("web", "0/3 nodes are available: 1 node(s) were unschedulable, 2 "+placement.ReasonAntiAffinity+". preemption: not eligible.")
		Consistently(fc.phase("web-apart"), testGrace+time.Second).Should(Equal(pgv1.PhaseApplyingHard))
		By("the third node cordoned: the other two hold a pod of web, and only the hard term keeps the pod out")
		fc.cordon("n3")
		Eventually(fc.phase("web-apart"), testGrace+10*time.Second).Should(Equal(pgv1.PhaseRollingBack), fc.explain("web-apart"))
		By("declaring the rollback done only once the restored template rolled out")
		Eventually(func() []corev1.PodAffinityTerm {
			return fc.antiAffinityOf("web").RequiredDuringSchedulingIgnoredDuringExecution
		}).Should(BeEmpty())
		Consistently(fc.phase("web-apart"), "500ms").Should(Equal(pgv1.PhaseRollingBack))
		fc.rollOut("web", "n1", "n2")
		Eventually(fc.phase("web-apart")).Should(Equal(pgv1.PhaseRolledBack), fc.explain("web-apart"))
		stalled := fc.condition("web-apart", pgv1.ConditionStalled)
		Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
		Expect(stalled.Reason).To(Equal(pgv1.ReasonPodsUnschedulable))
		Expect(stalled.Message).To(ContainSubstring("back to the Soft stage"))
		Expect(fc.condition("web-apart", pgv1.ConditionHardApplied).Reason).To(Equal(pgv1.ReasonRolledBack))
		Expect(fc.kstatus("web-apart")).To(Equal(status.FailedStatus))
		Expect(fc.pm("web-apart").Status.Stage).To(Equal(pgv1.StageSoft))
		aa := fc.antiAffinityOf("web")
		Expect(aa.RequiredDuringSchedulingIgnoredDuringExecution).To(BeEmpty())
		Expect(aa.PreferredDuringSchedulingIgnoredDuringExecution).To(HaveLen(1))
		Eventually(fc.eventReasons("web-apart")).Should(ContainElement(pgv1.ReasonPodsUnschedulable))

		By("staying rolled back until the spec changes")
		generation := fc.get("web").Generation
		poke(fc, "web-apart")
		Consistently(func() int64 { return fc.get("web").Generation }, "1s").Should(Equal(generation))
		Expect(fc.pm("web-apart").Status.Phase).To(Equal(pgv1.PhaseRolledBack))
	})

	It("rolls a stage back when it does not complete within stageTimeout, and retries after a spec change", func() {
		fc.rolledBackByTimeout("web-slow")
		Eventually(fc.antiAffinityOf).WithArguments("web").Should(BeNil())
		fc.rollOut("web", "n1")
		Eventually(fc.phase("web-slow")).Should(Equal(pgv1.PhaseRolledBack), fc.explain("web-slow"))
		Expect(fc.condition("web-slow", pgv1.ConditionStalled).Reason).To(Equal(pgv1.ReasonStageTimedOut))
		Expect(fc.condition("web-slow", pgv1.ConditionStalled).Message).To(ContainSubstring("did not complete within stageTimeout 10m0s"))
		Expect(fc.antiAffinityOf("web")).To(BeNil(), "the constraint found before the migration, none, is restored")

		editSpec(fc, "web-slow", func(s *pgv1.PlacementMigrationSpec) { s.StageTimeout = &metav1.Duration{Duration: 20 * time.Minute} })
		Eventually(fc.phase("web-slow")).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain("web-slow"))
	})

	It("rolls the stage back when the workload's rollout exceeds its progress deadline", func() {
		fc.webWithRoomToSpread()
		fc.migration("web-stuck", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameAntiAffinity(nil)})
		Eventually(fc.phase("web-stuck")).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain("web-stuck"))

		d := fc.get("web")
		d.Status.ObservedGeneration = d.Generation
		d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
			Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "web-g2" has timed out progressing.`}}
		Expect(k8sClient.Status().Update(ctx, d)).To(Succeed())
		Eventually(fc.phase("web-stuck")).Should(Equal(pgv1.PhaseRollingBack), fc.explain("web-stuck"))
		Eventually(fc.antiAffinityOf).WithArguments("web").Should(BeNil())
		fc.rollOut("web", "n1")
		Eventually(fc.phase("web-stuck")).Should(Equal(pgv1.PhaseRolledBack), fc.explain("web-stuck"))
		Expect(fc.condition("web-stuck", pgv1.ConditionStalled).Reason).To(Equal(pgv1.ReasonProgressDeadline))
		Expect(fc.antiAffinityOf("web")).To(BeNil())
	})

	It("names the writer that removed the constraint after success and puts it back, then stalls after three re-applies", func() {
		fc.node("n1", nil)
		fc.node("n2", nil)
		fc.deployment("web", 1)
		created := fc.get("web").CreationTimestamp
		fc.rollOut("web", "n1")
		fc.migration("web-soft", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameAntiAffinity(nil), FinalStage: pgv1.StageSoft})
		Eventually(fc.phase("web-soft")).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain("web-soft"))
		fc.rollOut("web", "n1")
		Eventually(fc.phase("web-soft")).Should(Equal(pgv1.PhaseSucceeded), fc.explain("web-soft"))
		Expect(fc.condition("web-soft", pgv1.ConditionConstraintInSync).Status).To(Equal(metav1.ConditionTrue))

		// Managed fields record time to the second: let the setup's second
		// pass so that the chart's write is the newest.
		Eventually(func() bool { return time.Now().After(created.Add(time.Second)) }).Should(BeTrue())
		chartUpgrade := func(revision string) {
			d := fc.get("web")
			d.Annotations = map[string]string{"meta.helm.sh/release-revision": revision}
			d.Spec.Template.Spec.Affinity = nil
			Expect(k8sClient.Update(ctx, d, client.FieldOwner("helm"))).To(Succeed())
		}
		chartUpgrade("2")
		Eventually(func() metav1.Condition { return fc.condition("web-soft", pgv1.ConditionConstraintInSync) }).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", pgv1.ReasonDrifted), HaveField("Message", ContainSubstring(`field manager "helm"`))))
		Eventually(fc.eventReasons("web-soft")).Should(ContainElement(pgv1.ReasonDrifted))
		By("not Ready while the entry waits out the backoff: a dashboard must not read success over a missing constraint")
		Expect(fc.condition("web-soft", pgv1.ConditionReady)).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", pgv1.ReasonDrifted)))
		Expect(fc.condition("web-soft", pgv1.ConditionReconciling).Status).To(Equal(metav1.ConditionTrue))

		By("re-applying after the backoff")
		Eventually(func() *corev1.PodAntiAffinity { return fc.antiAffinityOf("web") }, "10s").ShouldNot(BeNil())
		fc.rollOut("web", "n1")
		Eventually(func() metav1.ConditionStatus { return fc.condition("web-soft", pgv1.ConditionConstraintInSync).Status }).Should(Equal(metav1.ConditionTrue))
		Expect(fc.pm("web-soft").Status.DriftCorrections).To(Equal(int32(1)))

		By("stalling once the writer keeps removing it")
		for i, revision := range []string{"3", "4", "5"} {
			chartUpgrade(revision)
			Eventually(func() metav1.ConditionStatus { return fc.condition("web-soft", pgv1.ConditionConstraintInSync).Status }).Should(Equal(metav1.ConditionFalse))
			if i == 2 {
				break
			}
			// Skip the backoff rather than wait for it.
			testClock.Advance(time.Minute)
			DeferCleanup(testClock.Advance, -time.Minute)
			poke(fc, "web-soft")
			Eventually(func() *corev1.PodAntiAffinity { return fc.antiAffinityOf("web") }).ShouldNot(BeNil())
			fc.rollOut("web", "n1")
			Eventually(func() metav1.ConditionStatus { return fc.condition("web-soft", pgv1.ConditionConstraintInSync).Status }).Should(Equal(metav1.ConditionTrue))
		}
		Eventually(fc.phase("web-soft")).Should(Equal(pgv1.PhaseFailed), fc.explain("web-soft"))
		inSync := fc.condition("web-soft", pgv1.ConditionConstraintInSync)
		Expect(inSync.Reason).To(Equal(pgv1.ReasonDriftRetriesExceeded))
		Expect(inSync.Message).To(ContainSubstring("Commit the constraint where Deployment/web is defined"))
		Expect(fc.condition("web-soft", pgv1.ConditionStalled).Status).To(Equal(metav1.ConditionTrue))
		Expect(fc.kstatus("web-soft")).To(Equal(status.FailedStatus))
	})
})

// webWithRoomToSpread sets up the simplest target: one web pod running on
// the first of two nodes.
func (fc *fakeCluster) webWithRoomToSpread() {
	fc.node("n1", nil)
	fc.node("n2", nil)
	fc.deployment("web", 1)
	fc.rollOut("web", "n1")
}
