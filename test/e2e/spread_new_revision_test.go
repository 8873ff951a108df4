package e2e

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/test/utils"
)

// zoneSpread is the migration users ask for first: a hard zone spread of
// the workload's own pods, with no matchLabelKeys.
func zoneSpread(app string, maxSkew int32) pgv1.Constraint {
	return pgv1.Constraint{TopologySpread: &pgv1.TopologySpreadConstraint{
		TopologyKey: utils.ZoneLabel, MaxSkew: maxSkew,
		LabelSelector: pgv1.Labels(map[string]string{"app": app}),
	}}
}

// balancedDeployment starts replicas pods of app spread evenly over the
// zones, one node per zone.
func balancedDeployment(ctx SpecContext, env *utils.Env, app string, zones []string, replicas int, volumes ...corev1.Volume) (*appsv1.Deployment, utils.Zones) {
	nodes, err := env.AddZones(ctx, zones, 1)
	Expect(err).NotTo(HaveOccurred())
	d := utils.Deployment(env.Namespace, app, env.Pool(), 0, nil)
	d.Spec.Template.Spec.Volumes = volumes
	Expect(k8sClient.Create(ctx, d)).To(Succeed())
	counts := map[string]int{}
	for i := range replicas {
		counts[zones[i%len(zones)]]++
	}
	Expect(env.PlaceReplicas(ctx, d, nodes, counts)).To(Succeed())
	return getDeployment(ctx, env.Namespace, app), nodes
}

var _ = Describe("A hard zone spread on a Deployment counts only the new revision", Label("operator", "spread"), func() {
	It("plans, applies and verifies a balanced 3-replica Deployment over 3 zones, ending with one pod per zone", func(ctx SpecContext) {
		env := newEnv(ctx, "rates")
		_, zones := balancedDeployment(ctx, env, "rates-api", []string{"zone-a", "zone-b", "zone-c"}, 3)
		spec := pgv1.PlacementMigrationSpec{Targets: targetsNamed("rates-api"), Constraint: zoneSpread("rates-api", 1), DryRun: true}
		migration(ctx, env.Namespace, "rates-zones", spec)

		By("the dry-run plan says which pods the spread counts and where the rollout leaves them")
		Eventually(phaseOf(ctx, env.Namespace, "rates-zones")).Should(Equal(pgv1.PhasePlanned), explain(ctx, env.Namespace, "rates-zones"))
		plan := getMigration(ctx, env.Namespace, "rates-zones").Status.Plan
		Expect(plan).To(HaveLen(1))
		Expect(plan[0].Change).To(ContainSubstring("counting only the pods of the revision being rolled out (matchLabelKeys: [pod-template-hash])"))
		Expect(plan[0].PredictedPlacement).To(ContainSubstring("zone-a=1, zone-b=1, zone-c=1"))

		By("applying it")
		pm := getMigration(ctx, env.Namespace, "rates-zones")
		patch := client.MergeFrom(pm.DeepCopy())
		pm.Spec.DryRun = false
		Expect(k8sClient.Patch(ctx, pm, patch)).To(Succeed())
		Eventually(phaseOf(ctx, env.Namespace, "rates-zones")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "rates-zones"))

		pods := allRunning(ctx, env.Namespace, map[string]string{"app": "rates-api"}, 3)
		Expect(zones.Count(pods)).To(Equal(map[string]int{"zone-a": 1, "zone-b": 1, "zone-c": 1}), utils.Placement(pods))
		spread := getDeployment(ctx, env.Namespace, "rates-api").Spec.Template.Spec.TopologySpreadConstraints
		Expect(spread).To(HaveLen(1))
		Expect(spread[0].WhenUnsatisfiable).To(Equal(corev1.DoNotSchedule))
		Expect(spread[0].MatchLabelKeys).To(Equal([]string{appsv1.DefaultDeploymentUniqueLabelKey}))
		applied := getMigration(ctx, env.Namespace, "rates-zones").Status.Targets[0].Applied
		Expect(applied).NotTo(BeNil())
		Expect(applied.TopologySpreadConstraints).To(Equal(spread), "status records the entry exactly as written")
		Expect(conditionOf(ctx, env.Namespace, "rates-zones", pgv1.ConditionHardApplied).Message).To(ContainSubstring("pod-template-hash in ("))
	})

	It("blocks the opt-out before any write, with the skew its rollout can end in", func(ctx SpecContext) {
		env := newEnv(ctx, "rates-all")
		d, _ := balancedDeployment(ctx, env, "rates-api", []string{"zone-a", "zone-b", "zone-c"}, 3)
		spec := pgv1.PlacementMigrationSpec{Targets: targetsNamed("rates-api"), Constraint: zoneSpread("rates-api", 1)}
		spec.Constraint.TopologySpread.RevisionScope = ptr.To(pgv1.RevisionScopeAll)
		migration(ctx, env.Namespace, "rates-zones", spec)

		Eventually(phaseOf(ctx, env.Namespace, "rates-zones")).Should(Equal(pgv1.PhaseBlocked), explain(ctx, env.Namespace, "rates-zones"))
		feasible := conditionOf(ctx, env.Namespace, "rates-zones", pgv1.ConditionFeasible)
		Expect(feasible.Reason).To(Equal(placement.HazardSpreadEndsSkewed))
		Expect(feasible.Message).To(And(ContainSubstring("skew 2 > maxSkew 1"), ContainSubstring("pod-template-hash")))
		after := getDeployment(ctx, env.Namespace, "rates-api")
		Expect(after.Generation).To(Equal(d.Generation), "nothing was written to the Deployment")
		Expect(after.Spec.Template.Spec.TopologySpreadConstraints).To(BeEmpty())
	})

	It("spreads 6 replicas over 3 zones with maxSkew 1", func(ctx SpecContext) {
		env := newEnv(ctx, "six")
		_, zones := balancedDeployment(ctx, env, "web", []string{"zone-a", "zone-b", "zone-c"}, 6)
		migration(ctx, env.Namespace, "web-zones", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: zoneSpread("web", 1)})
		Eventually(phaseOf(ctx, env.Namespace, "web-zones")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "web-zones"))
		pods := allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 6)
		Expect(zones.Count(pods)).To(Equal(map[string]int{"zone-a": 2, "zone-b": 2, "zone-c": 2}), utils.Placement(pods))
	})

	It("spreads a StatefulSet's 3 replicas over 3 zones, counting every revision as it replaces pods in place", func(ctx SpecContext) {
		env := newEnv(ctx, "sts")
		zones, err := env.AddZones(ctx, []string{"zone-a", "zone-b", "zone-c"}, 1)
		Expect(err).NotTo(HaveOccurred())
		Expect(k8sClient.Create(ctx, utils.StatefulSet(env.Namespace, "db", env.Pool(), 3))).To(Succeed())
		allRunning(ctx, env.Namespace, map[string]string{"app": "db"}, 3)
		migration(ctx, env.Namespace, "db-zones", pgv1.PlacementMigrationSpec{
			Targets:    []pgv1.TargetRef{{Kind: pgv1.KindStatefulSet, Name: "db"}},
			Constraint: zoneSpread("db", 1),
		})
		Eventually(phaseOf(ctx, env.Namespace, "db-zones")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "db-zones"))
		pods := allRunning(ctx, env.Namespace, map[string]string{"app": "db"}, 3)
		Expect(zones.Count(pods)).To(Equal(map[string]int{"zone-a": 1, "zone-b": 1, "zone-c": 1}), utils.Placement(pods))
		sts := &appsv1.StatefulSet{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: "db"}, sts)).To(Succeed())
		Expect(sts.Spec.Template.Spec.TopologySpreadConstraints).To(HaveLen(1))
		Expect(sts.Spec.Template.Spec.TopologySpreadConstraints[0].MatchLabelKeys).To(BeEmpty())
	})
})
