package controller

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// A stage that stalls is written back to what the targets carried before it (step 9).
var _ = Describe("Rolling back on its own", func() {
	var fc *fakeCluster
	BeforeEach(func() { fc = newFakeCluster() })

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
		stepAndLook(fc, "web-apart", testGrace)
		Consistently(fc.phase("web-apart"), "1s").Should(Equal(pgv1.PhaseApplyingHard))
		By("the third node cordoned: the other two hold a pod of web, and only the hard term keeps the pod out")
		fc.cordon("n3")
		Eventually(fc.phase("web-apart")).Should(Equal(pgv1.PhaseRollingBack), fc.explain("web-apart"))
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
})
