package controller

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// A migration reads its targets first (step 1).
var _ = Describe("Targets", func() {
	var fc *fakeCluster
	BeforeEach(func() { fc = newFakeCluster() })

	It("blocks a migration whose target does not exist, naming it", func() {
		fc.migration("ghost", pgv1.PlacementMigrationSpec{Targets: targetsNamed("ghost"), Constraint: hostnameAntiAffinity(nil)})
		Eventually(fc.phase("ghost")).Should(Equal(pgv1.PhaseBlocked), fc.explain("ghost"))
		ready := fc.condition("ghost", pgv1.ConditionReady)
		Expect(ready.Reason).To(Equal(pgv1.ReasonTargetNotFound))
		Expect(ready.Message).To(ContainSubstring("Deployment/ghost not found in namespace " + fc.ns))
	})
})
