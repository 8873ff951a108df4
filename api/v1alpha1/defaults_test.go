package v1alpha1_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

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

var _ = Describe("Unset and zero are told apart on every client", func() {
	It("keeps an explicit zero soak, minimum pod age and restart limit from a Go client", func() {
		zero := metav1.Duration{}
		pm := &pgv1.PlacementMigration{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "zeroes"},
			Spec: pgv1.PlacementMigrationSpec{
				Targets:      []pgv1.TargetRef{{Kind: pgv1.KindDeployment, Name: "web"}},
				Constraint:   pgv1.Constraint{PodAntiAffinity: &pgv1.PodAntiAffinityConstraint{TopologyKey: "kubernetes.io/hostname"}},
				SoakDuration: &zero,
				Guards:       &pgv1.Guards{MinPodAge: &zero, MaxRestarts: ptr.To[int32](0)},
			},
		}
		Expect(k8sClient.Create(ctx, pm)).To(Succeed())
		got := &pgv1.PlacementMigration{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: "default", Name: "zeroes"}, got)).To(Succeed())
		Expect(got.Spec.Soak()).To(BeZero(), "an explicit 0s soak is not replaced by the 5m default")
		Expect(got.Spec.MinPodAge()).To(BeZero())
		Expect(got.Spec.Guards.MaxRestarts).To(HaveValue(BeZero()))
		Expect(got.Spec.StageTimeout.Duration).To(Equal(15*time.Minute), "an unset stageTimeout takes the default")
	})

	It("leaves maxRestarts unset when it is not given", func() {
		u := migration(validSpec())
		Expect(k8sClient.Create(ctx, u)).To(Succeed())
		got := &pgv1.PlacementMigration{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}, got)).To(Succeed())
		Expect(got.Spec.Guards).NotTo(BeNil())
		Expect(got.Spec.Guards.MaxRestarts).To(BeNil())
		Expect(got.Spec.MaxRestarts()).To(BeZero())
	})

	It("applies the same defaults in Go to a spec that never met the API server", func() {
		var spec pgv1.PlacementMigrationSpec
		Expect(spec.Soak()).To(Equal(pgv1.DefaultSoakDuration))
		Expect(spec.Timeout()).To(Equal(pgv1.DefaultStageTimeout))
		Expect(spec.MinPodAge()).To(Equal(pgv1.DefaultMinPodAge))
		Expect(spec.Final()).To(Equal(pgv1.StageHard))
	})
})
