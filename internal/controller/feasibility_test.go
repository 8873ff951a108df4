package controller

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/workloadpatch"
)

// A migration whose rollout the engine proves cannot complete is Blocked, naming the hazard, and writes nothing (step 4); a dry run stops at the plan (step 6).
var _ = Describe("Feasibility", func() {
	var fc *fakeCluster
	BeforeEach(func() { fc = newFakeCluster() })

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
		fc.reportRolledOut("web") // its controller observes the new strategy
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
})
