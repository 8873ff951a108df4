package controller

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

var _ = Describe("A target whose controller cannot make its pods", func() {
	var fc *fakeCluster
	BeforeEach(func() { fc = newFakeCluster() })

	// shortOfPods raises web to 5 replicas of which its controller could
	// make none more: a pod quota of three, as the ReplicaSet and then
	// the Deployment controller report it.
	shortOfPods := func() {
		d := fc.get("web")
		d.Spec.Replicas = ptr.To[int32](5)
		Expect(k8sClient.Update(ctx, d)).To(Succeed())
		d = fc.get("web")
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate",
				Message:            `pods "web-7d4b9c-x2" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=3, limited: pods=3`,
				LastTransitionTime: now(), LastUpdateTime: now()}}}
		Expect(k8sClient.Status().Update(ctx, d)).To(Succeed())
	}

	It("names the cause the workload's controller gives, is Stalled once the stage timeout has passed, writes nothing, and goes on once the pods exist", func() {
		for _, n := range []string{"n1", "n2", "n3", "n4", "n5"} {
			fc.node(n, nil)
		}
		fc.deployment("web", 3)
		fc.rollOut("web", "n1", "n2", "n3")
		shortOfPods()
		fc.migration("web-apart", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameAntiAffinity(nil)})

		Eventually(func() metav1.Condition { return fc.condition("web-apart", pgv1.ConditionPodsStable) }).Should(And(
			HaveField("Reason", pgv1.ReasonWaitingForPodView), HaveField("Message", And(ContainSubstring("has created 3 of its 5 pods"), ContainSubstring("exceeded quota")))),
			fc.explain("web-apart"))
		Expect(fc.condition("web-apart", pgv1.ConditionStalled).Type).To(BeEmpty(), "not Stalled within the stage timeout")

		By("the stage timeout passes: Stalled, naming the quota, and nothing written")
		stepAndLook(fc, "web-apart", 16*time.Minute)
		Eventually(func() metav1.Condition { return fc.condition("web-apart", pgv1.ConditionStalled) }).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", pgv1.ReasonTargetPodsMissing),
			HaveField("Message", And(ContainSubstring("exceeded quota"), ContainSubstring("longer than the stage timeout")))), fc.explain("web-apart"))
		Expect(fc.get("web").Generation).To(Equal(int64(2)), "nothing is written while the pods are missing")

		By("the quota is raised and the pods exist: the migration goes on by itself")
		rs := &appsv1.ReplicaSet{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: fc.ns, Name: "web-g1"}, rs)).To(Succeed(), "the ReplicaSet of web's one template")
		for _, n := range []string{"n4", "n5"} {
			fc.pod(rs, fc.ns+"-"+n, readyPod)
		}
		fc.reportRolledOut("web")
		poke(fc, "web-apart")
		Eventually(func() string { return fc.condition("web-apart", pgv1.ConditionStalled).Reason }).ShouldNot(Equal(pgv1.ReasonTargetPodsMissing), fc.explain("web-apart"))
		Eventually(fc.phase("web-apart")).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain("web-apart"))
	})

	It("names the cause at once when the workload's controller gives it after a wait that had none", func() {
		for _, n := range []string{"n1", "n2", "n3", "n4", "n5"} {
			fc.node(n, nil)
		}
		fc.deployment("web", 3)
		fc.rollOut("web", "n1", "n2", "n3")
		d := fc.get("web")
		d.Spec.Replicas = ptr.To[int32](5)
		Expect(k8sClient.Update(ctx, d)).To(Succeed())
		fc.migration("web-apart", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameAntiAffinity(nil)})

		By("the Deployment's controller has not reported the new generation: a wait with no cause, said once it lasts")
		stepAndLook(fc, "web-apart", 10*time.Second)
		Eventually(func() metav1.Condition { return fc.condition("web-apart", pgv1.ConditionPodsStable) }).Should(And(
			HaveField("Reason", pgv1.ReasonWaitingForPodView), HaveField("Message", ContainSubstring("has not yet observed its generation 2"))),
			fc.explain("web-apart"))

		By("its controller then reports the quota: the status names it without waiting for the next progress refresh")
		shortOfPods()
		Eventually(func() string { return fc.condition("web-apart", pgv1.ConditionPodsStable).Message }).Should(And(
			ContainSubstring("has created 3 of its 5 pods"), ContainSubstring("exceeded quota")), fc.explain("web-apart"))
	})

	It("never holds a stage that only lowers the constraint", func() {
		for _, n := range []string{"n1", "n2", "n3", "n4", "n5"} {
			fc.node(n, nil)
		}
		fc.deployment("web", 3)
		fc.rollOut("web", "n1", "n2", "n3")
		fc.migration("web-apart", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameAntiAffinity(nil)})
		Eventually(fc.phase("web-apart")).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain("web-apart"))
		fc.rollOut("web", "n1", "n2", "n3")
		Eventually(fc.phase("web-apart")).Should(Equal(pgv1.PhaseApplyingHard), fc.explain("web-apart"))
		fc.rollOut("web", "n1", "n2", "n3")
		Eventually(fc.phase("web-apart")).Should(Equal(pgv1.PhaseSucceeded), fc.explain("web-apart"))

		By("the pods fall short and the spec lowers the final stage to Soft: the soft form is written all the same")
		shortOfPods()
		editSpec(fc, "web-apart", func(s *pgv1.PlacementMigrationSpec) { s.FinalStage = pgv1.StageSoft })
		Eventually(func() int { return len(fc.antiAffinityOf("web").RequiredDuringSchedulingIgnoredDuringExecution) }).Should(BeZero(), fc.explain("web-apart"))
		Expect(fc.antiAffinityOf("web").PreferredDuringSchedulingIgnoredDuringExecution).To(HaveLen(1))
	})
})
