package controller

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// What a deleted migration leaves behind is what onDelete says.
var _ = Describe("Deleting a migration", func() {
	var fc *fakeCluster
	BeforeEach(func() { fc = newFakeCluster() })

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
})
