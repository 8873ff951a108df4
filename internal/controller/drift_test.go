package controller

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// A verified entry someone removes is written again, a few times (step 10).
var _ = Describe("Drift", func() {
	var fc *fakeCluster
	BeforeEach(func() { fc = newFakeCluster() })

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

		By("re-applying after the backoff, and not before")
		Consistently(func() *corev1.PodAntiAffinity { return fc.antiAffinityOf("web") }, "1s").Should(BeNil())
		stepAndLook(fc, "web-soft", 5*time.Second)
		Eventually(func() *corev1.PodAntiAffinity { return fc.antiAffinityOf("web") }).ShouldNot(BeNil())
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
			stepAndLook(fc, "web-soft", time.Minute)
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
