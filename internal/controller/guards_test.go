package controller

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// A paused migration and pods not yet stable hold a stage back (steps 5 and the pause).
var _ = Describe("Guards before a stage", func() {
	var fc *fakeCluster
	BeforeEach(func() { fc = newFakeCluster() })

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

		By("still waiting a minute before the pods are an hour old")
		stepAndLook(fc, "web-young", 59*time.Minute)
		Consistently(fc.phase("web-young"), "1s").Should(Equal(pgv1.PhasePending), fc.explain("web-young"))
		Expect(fc.get("web").Generation).To(Equal(int64(1)))

		By("writing the soft stage once they are")
		stepAndLook(fc, "web-young", time.Minute)
		Eventually(fc.phase("web-young")).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain("web-young"))
	})
})
