package v1alpha1_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

var _ = Describe("PlacementMigration defaults", func() {
	It("fills in the documented defaults of an anti-affinity migration", func() {
		u := migration(validSpec())
		Expect(k8sClient.Create(ctx, u)).To(Succeed())

		var pm pgv1.PlacementMigration
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}, &pm)).To(Succeed())
		Expect(pm.Spec.FinalStage).To(Equal(pgv1.StageHard))
		Expect(pm.Spec.SoakDuration.Duration).To(Equal(5 * time.Minute))
		Expect(pm.Spec.StageTimeout.Duration).To(Equal(15 * time.Minute))
		Expect(pm.Spec.Guards.MinPodAge.Duration).To(Equal(2 * time.Minute))
		Expect(pm.Spec.Guards.MaxRestarts).To(BeZero())
		Expect(pm.Spec.OnDelete).To(Equal(pgv1.DeletionRetain))
		Expect(pm.Spec.Paused).To(BeFalse())
		Expect(pm.Spec.DryRun).To(BeFalse())
	})

	It("fills in the scheduler's own defaults of a spread", func() {
		u := migration(spreadSpec(map[string]any{"topologyKey": "topology.kubernetes.io/zone"}))
		Expect(k8sClient.Create(ctx, u)).To(Succeed())

		var pm pgv1.PlacementMigration
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}, &pm)).To(Succeed())
		spread := pm.Spec.Constraint.TopologySpread
		Expect(spread).NotTo(BeNil())
		Expect(spread.MaxSkew).To(Equal(int32(1)))
		Expect(spread.NodeAffinityPolicy).To(Equal(pgv1.PolicyHonor))
		Expect(spread.NodeTaintsPolicy).To(Equal(pgv1.PolicyIgnore))
		Expect(spread.MinDomains).To(BeNil())
	})

	It("selects both workload kinds when a targetSelector names none", func() {
		s := validSpec()
		delete(s, "targets")
		s["targetSelector"] = map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/part-of": "flux"}}}
		u := migration(s)
		Expect(k8sClient.Create(ctx, u)).To(Succeed())

		var pm pgv1.PlacementMigration
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}, &pm)).To(Succeed())
		Expect(pm.Spec.TargetSelector.Kinds).To(ConsistOf(pgv1.KindDeployment, pgv1.KindStatefulSet))
	})
})
