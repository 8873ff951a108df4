package controller

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/metrics"
	"github.com/placement-guard/placement-guard/internal/placement"
)

var _ = Describe("A succeeded migration", func() {
	var fc *fakeCluster
	BeforeEach(func() { fc = newFakeCluster() })

	// softApplied starts a hard hostname anti-affinity migration of web (2
	// replicas on n1, n2, replaced one at a time) and rolls its soft stage
	// out.
	softApplied := func(guards *pgv1.Guards) {
		fc.node("n1", nil)
		fc.node("n2", nil)
		fc.deployment("web", 2, func(d *appsv1.Deployment) {
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromInt32(1))}}
		})
		fc.rollOut("web", "n1", "n2")
		fc.migration("web-apart", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameAntiAffinity(nil), Guards: guards})
		Eventually(fc.phase("web-apart")).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain("web-apart"))
		fc.rollOut("web", "n1", "n2")
	}

	// succeeded takes the migration of softApplied to its end.
	succeeded := func() {
		softApplied(nil)
		Eventually(fc.phase("web-apart")).Should(Equal(pgv1.PhaseApplyingHard), fc.explain("web-apart"))
		fc.rollOut("web", "n1", "n2")
		Eventually(fc.phase("web-apart")).Should(Equal(pgv1.PhaseSucceeded), fc.explain("web-apart"))
	}

	// scaleTo scales web as kubectl scale does, and reports it as the
	// Deployment controller would with only the first two pods placed.
	scaleTo := func(replicas int32) {
		d := fc.get("web")
		d.Spec.Replicas = ptr.To(replicas)
		Expect(k8sClient.Update(ctx, d)).To(Succeed())
		d = fc.get("web")
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: replicas, UpdatedReplicas: replicas, ReadyReplicas: 2, AvailableReplicas: 2}
		Expect(k8sClient.Status().Update(ctx, d)).To(Succeed())
	}

	It("turns Degraded, naming the pods its constraint keeps Pending and the capacity it needs, and Succeeded again once they fit", func() {
		succeeded()
		rs := fc.replicaSet(fc.get("web"))

		By("a scale-up beyond the qualifying nodes")
		scaleTo(3)
		pending := fc.pod(rs, "", unschedulableWith("0/2 nodes are available: 2 "+placement.ReasonAntiAffinity+". preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."))
		Consistently(fc.phase("web-apart"), "1s").Should(Equal(pgv1.PhaseSucceeded), "not before the grace")
		stepAndLook(fc, "web-apart", testGrace)
		Eventually(fc.phase("web-apart")).Should(Equal(pgv1.PhaseDegraded), fc.explain("web-apart"))
		ready := fc.condition("web-apart", pgv1.ConditionReady)
		Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		Expect(ready.Reason).To(Equal(pgv1.ReasonConstraintUnsatisfied), ready.Message)
		Expect(ready.Message).To(And(ContainSubstring("1 of 3 pods of Deployment/web Pending because of the Hard constraint ("+pending.Name+")"),
			ContainSubstring("2 of 3 qualifying nodes")))
		Expect(fc.condition("web-apart", pgv1.ConditionStalled).Status).To(Equal(metav1.ConditionTrue))
		Expect(fc.kstatus("web-apart")).To(Equal(status.FailedStatus))
		Eventually(fc.eventReasons("web-apart")).Should(ContainElement(pgv1.ReasonConstraintUnsatisfied))

		By("writing no status while it stays so")
		rv := fc.pm("web-apart").ResourceVersion
		poke(fc, "web-apart")
		poked := fc.pm("web-apart").ResourceVersion
		Consistently(func() string { return fc.pm("web-apart").ResourceVersion }, "1s").Should(Equal(poked))
		Expect(poked).NotTo(Equal(rv))

		By("a third node: the pod fits, and the migration says so while the pod is still Pending")
		fc.node("n3", nil)
		Eventually(func() string { return fc.condition("web-apart", pgv1.ConditionReady).Message }).Should(Equal(
			"1 of 3 pods of Deployment/web still Pending (" + pending.Name + "): room has appeared for them, and the scheduler has not placed them yet"))
		Expect(fc.phase("web-apart")()).To(Equal(pgv1.PhaseDegraded), "not Succeeded over a Pending pod")
		Expect(fc.condition("web-apart", pgv1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
		Expect(fc.condition("web-apart", pgv1.ConditionReady).Reason).To(Equal(pgv1.ReasonConstraintUnsatisfied))

		By("the room gone before the scheduler's next try: Degraded as before, Ready never True between")
		Expect(k8sClient.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fc.ns + "-n3"}})).To(Succeed())
		Eventually(func() string { return fc.condition("web-apart", pgv1.ConditionReady).Message }).Should(
			ContainSubstring("1 of 3 pods of Deployment/web Pending because of the Hard constraint (" + pending.Name + ")"))
		Expect(fc.condition("web-apart", pgv1.ConditionReady).LastTransitionTime).To(Equal(ready.LastTransitionTime), "Ready stayed False throughout")

		By("the node back and the pod bound to it: Succeeded again")
		fc.node("n3", nil)
		fc.bind(pending, "n3")
		Eventually(fc.phase("web-apart")).Should(Equal(pgv1.PhaseSucceeded), fc.explain("web-apart"))
		Expect(fc.condition("web-apart", pgv1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
		Expect(fc.kstatus("web-apart")).To(Equal(status.CurrentStatus))
		Expect(fc.get("web").Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution).To(HaveLen(1), "the constraint stays")
	})

	It("names pods Pending for a reason its constraint does not cause with a reason of their own", func() {
		succeeded()
		rs := fc.replicaSet(fc.get("web"))
		scaleTo(3)
		fc.node("n3", nil)
		fc.pod(rs, "", unschedulableWith("0/3 nodes are available: 1 Insufficient cpu, 2 "+placement.ReasonAntiAffinity+"."), func(spec *corev1.PodSpec) {
			spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("8")
		})
		stepAndLook(fc, "web-apart", testGrace)
		Eventually(fc.phase("web-apart")).Should(Equal(pgv1.PhaseDegraded), fc.explain("web-apart"))
		ready := fc.condition("web-apart", pgv1.ConditionReady)
		Expect(ready.Reason).To(Equal(pgv1.ReasonTargetPodsPending))
		Expect(ready.Message).To(And(ContainSubstring("Pending for a reason the constraint does not cause"), ContainSubstring("Insufficient cpu")))
		Expect(ready.Message).NotTo(ContainSubstring("because of the Hard constraint"))

		By("the pod gone, Succeeded again")
		Expect(k8sClient.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(fc.ns), client.MatchingFields{"spec.nodeName": ""}, client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(fc.phase("web-apart")).Should(Equal(pgv1.PhaseSucceeded), fc.explain("web-apart"))
	})

	It("records in DisruptionReady the first disruption its targets would not survive, and its fix", func() {
		succeeded()
		disruption := func() metav1.Condition { return fc.condition("web-apart", pgv1.ConditionDisruptionReady) }

		By("the pre-flight check warned before the hard stage (guards.disruptions defaults to Warn)")
		Eventually(fc.eventReasons("web-apart")).Should(ContainElement(pgv1.ReasonEvictedPodUnplaceable))

		By("2 replicas on 2 nodes: a drain strands the evicted pod")
		Eventually(disruption).Should(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", pgv1.ReasonEvictedPodUnplaceable)))
		Expect(disruption().Message).To(And(ContainSubstring("a drain of node "+fc.ns+"-n1"), ContainSubstring("add a qualifying node (N+1)"),
			ContainSubstring("a surge upgrade (a new node joins before each old one is drained, in turn) would place it")))
		Expect(fc.condition("web-apart", pgv1.ConditionReady).Status).To(Equal(metav1.ConditionTrue), "it informs, Ready does not depend on it")

		By("a spare node: every drain places the evicted pod")
		fc.node("n3", nil)
		Eventually(disruption).Should(HaveField("Status", metav1.ConditionTrue))
		Expect(disruption().Reason).To(Equal(pgv1.ReasonDisruptionsTolerated))

		By("not simulating again while nothing it depends on changes")
		// The new node's own late updates may still bring a verdict:
		// counted from once the count holds still.
		Eventually(func(g Gomega) {
			settled := metrics.DisruptionSimulations()
			g.Consistently(metrics.DisruptionSimulations, "500ms").Should(Equal(settled))
		}).Should(Succeed())
		simulations := metrics.DisruptionSimulations()
		poke(fc, "web-apart")
		Consistently(metrics.DisruptionSimulations, "1s").Should(Equal(simulations))

		By("a PodDisruptionBudget that allows no eviction")
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: fc.ns, Name: "web"}, Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(2)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
		Expect(k8sClient.Create(ctx, pdb)).To(Succeed())
		Eventually(disruption).Should(HaveField("Reason", pgv1.ReasonDrainBlockedByBudget))
		Expect(disruption().Message).To(ContainSubstring("PodDisruptionBudget web requires minAvailable 2 of 2 replicas"))
		Expect(k8sClient.Delete(ctx, pdb)).To(Succeed())
		Eventually(disruption).Should(HaveField("Status", metav1.ConditionTrue))

		By("an autoscaler that may scale beyond the nodes")
		hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: fc.ns, Name: "web"}, Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, MinReplicas: ptr.To(int32(2)), MaxReplicas: 4}}
		Expect(k8sClient.Create(ctx, hpa)).To(Succeed())
		Eventually(disruption).Should(HaveField("Reason", pgv1.ReasonScaleOutUnsatisfiable))
		Expect(disruption().Message).To(ContainSubstring("HorizontalPodAutoscaler web may scale Deployment/web to 4 replicas, but under the Hard constraint only 3 fit"))
		hpa.Spec.MaxReplicas = 3
		Expect(k8sClient.Update(ctx, hpa)).To(Succeed())
		Eventually(disruption).Should(HaveField("Status", metav1.ConditionTrue))
		Expect(disruption().Message).To(ContainSubstring("3 replicas fit"))

		By("a pod being deleted counts where it runs until it is gone: no verdict is drawn meanwhile, and one is drawn after")
		leaving := fc.pod(fc.replicaSet(fc.get("web")), fc.ns+"-n3", readyPod)
		leaving.Finalizers = []string{"placementguard.io/test-hold"}
		Expect(k8sClient.Update(ctx, leaving)).To(Succeed())
		Expect(k8sClient.Delete(ctx, leaving)).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(hpa), hpa)).To(Succeed())
		hpa.Spec.MinReplicas = ptr.To(int32(1))
		Expect(k8sClient.Update(ctx, hpa)).To(Succeed())
		Consistently(disruption, "1s").Should(HaveField("Status", metav1.ConditionTrue), "judged with the leaving pod on n3, the third replica has no node")
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(leaving), leaving)).To(Succeed())
		leaving.Finalizers = nil
		Expect(k8sClient.Update(ctx, leaving)).To(Succeed())
		Eventually(disruption).Should(And(HaveField("Status", metav1.ConditionTrue), HaveField("Message", ContainSubstring("3 replicas fit"))))
	})

	// hardRolledOutLeavingAPod rolls the hard stage out while the rollout's
	// last old pod, held by a finalizer, still terminates on n3 (the spare
	// node), and gives that pod.
	hardRolledOutLeavingAPod := func() *corev1.Pod {
		fc.node("n3", nil)
		softApplied(nil)
		Eventually(fc.phase("web-apart")).Should(Equal(pgv1.PhaseApplyingHard), fc.explain("web-apart"))
		var old corev1.PodList
		Expect(k8sClient.List(ctx, &old, client.InNamespace(fc.ns), client.MatchingFields{"spec.nodeName": fc.ns + "-n2"})).To(Succeed())
		Expect(old.Items).To(HaveLen(1))
		leaving := &old.Items[0]
		leaving.Spec.NodeName = fc.ns + "-n3"
		leaving.Finalizers = []string{"placementguard.io/test-hold"}
		leaving.Name, leaving.ResourceVersion, leaving.UID = leaving.Name+"-on-n3", "", ""
		Expect(k8sClient.Create(ctx, leaving)).To(Succeed())
		fc.rollOut("web", "n1", "n2")
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(leaving), leaving)).To(Succeed())
		Expect(leaving.DeletionTimestamp).NotTo(BeNil(), "the rollout deleted it")
		return leaving
	}
	release := func(leaving *corev1.Pod) {
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(leaving), leaving)).To(Succeed())
		leaving.Finalizers = nil
		Expect(k8sClient.Update(ctx, leaving)).To(Succeed())
	}
	disruption := func(pm *pgv1.PlacementMigration) *metav1.Condition {
		return meta.FindStatusCondition(pm.Status.Conditions, pgv1.ConditionDisruptionReady)
	}

	It("holds its success while a pod of the last rollout is still leaving, and writes it with its first verdict once the pod has gone", func() {
		leaving := hardRolledOutLeavingAPod()
		Consistently(fc.phase("web-apart"), "2s").Should(Equal(pgv1.PhaseApplyingHard),
			"judged with the leaving pod on n3, a drain of n1 or n2 has no node: the success waits for it to go")
		release(leaving)
		var pm *pgv1.PlacementMigration
		Eventually(func() pgv1.Phase { pm = fc.pm("web-apart"); return pm.Status.Phase }).Should(Equal(pgv1.PhaseSucceeded), fc.explain("web-apart"))
		Expect(disruption(pm)).To(And(Not(BeNil()), HaveField("Status", metav1.ConditionTrue)),
			"the status that says Succeeded carries the verdict: the spare node takes a drained pod")
		By("the hard stage's verification, reached again on every pass the success was held, is told once")
		hardVerified := func() []eventsv1.Event {
			var list eventsv1.EventList
			Expect(k8sClient.List(ctx, &list, client.InNamespace(fc.ns))).To(Succeed())
			var out []eventsv1.Event
			for _, e := range list.Items {
				if e.Regarding.Name == "web-apart" && e.Reason == pgv1.ReasonStageVerified && strings.HasPrefix(e.Note, "The Hard stage") {
					out = append(out, e)
				}
			}
			return out
		}
		Eventually(hardVerified).Should(HaveLen(1))
		Consistently(hardVerified, "1s").Should(ConsistOf(HaveField("Series", BeNil())))
	})

	It("writes its success without a verdict once the pod has been leaving for the grace, and draws the verdict once it has gone", func() {
		leaving := hardRolledOutLeavingAPod()
		Consistently(fc.phase("web-apart"), "1s").Should(Equal(pgv1.PhaseApplyingHard))
		stepAndLook(fc, "web-apart", settleGrace)
		Eventually(fc.phase("web-apart")).Should(Equal(pgv1.PhaseSucceeded), fc.explain("web-apart"))
		Consistently(func() *metav1.Condition { return disruption(fc.pm("web-apart")) }, "2s").Should(BeNil(),
			"judged with the leaving pod on n3, a drain of n1 or n2 has no node")
		release(leaving)
		Eventually(func() *metav1.Condition { return disruption(fc.pm("web-apart")) }).Should(
			And(Not(BeNil()), HaveField("Status", metav1.ConditionTrue)), "the spare node takes a drained pod")
	})

	It("records the loss of a zone that a zone spread's pods cannot survive, and its end once a third zone has room", func() {
		fc.zonalNodes()
		fc.deployment("web", 2)
		fc.rollOut("web", "a1", "b1")
		fc.migration("web-zones", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: zoneSpreadOf(map[string]string{"app": "web"})})
		fc.succeed("web-zones", "web", "a1", "b1")
		disruption := func() metav1.Condition { return fc.condition("web-zones", pgv1.ConditionDisruptionReady) }

		By("the pre-flight simulated the loss of a zone on the placement the hard stage would leave, and warned")
		Eventually(fc.eventReasons("web-zones")).Should(ContainElement(pgv1.ReasonZoneLossUnplaceable))

		By("two zones, one pod each: a drain moves a pod within its zone, the loss of a zone strands it")
		Eventually(disruption).Should(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", pgv1.ReasonZoneLossUnplaceable)))
		Expect(disruption().Message).To(And(
			ContainSubstring("the loss of "+corev1.LabelTopologyZone+"=a (2 nodes unreachable, their pods gone) leaves"),
			ContainSubstring(placement.ReasonSpread),
			ContainSubstring("set nodeTaintsPolicy Honor")))

		By("a third zone: the lost zone's pod goes there")
		fc.node("c1", map[string]string{corev1.LabelTopologyZone: "c"})
		Eventually(disruption).Should(HaveField("Status", metav1.ConditionTrue))
		Expect(disruption().Message).To(ContainSubstring("and the loss of any one " + corev1.LabelTopologyZone))
	})

	It("keeps the soft stage when guards.disruptions is Block and a drain would strand a pod, and applies the hard one once a spare node exists", func() {
		softApplied(&pgv1.Guards{Disruptions: pgv1.DisruptionBlock})

		By("blocked before the hard stage, naming the drain and its fix")
		Eventually(fc.phase("web-apart")).Should(Equal(pgv1.PhaseBlocked), fc.explain("web-apart"))
		ready := fc.condition("web-apart", pgv1.ConditionReady)
		Expect(ready.Reason).To(Equal(pgv1.ReasonEvictedPodUnplaceable))
		Expect(ready.Message).To(And(ContainSubstring("once the Hard stage has rolled out, a drain of node "+fc.ns+"-n"),
			ContainSubstring("which no other node admits under the Hard constraint"), ContainSubstring("add a qualifying node (N+1)"), ContainSubstring("guards.disruptions: Block")))
		Expect(fc.antiAffinityOf("web").RequiredDuringSchedulingIgnoredDuringExecution).To(BeEmpty(), "the soft stage stays")

		By("a spare node: the hard stage goes ahead")
		fc.node("n3", nil)
		Eventually(fc.phase("web-apart")).Should(Equal(pgv1.PhaseApplyingHard), fc.explain("web-apart"))
		fc.rollOut("web", "n1", "n2")
		Eventually(fc.phase("web-apart")).Should(Equal(pgv1.PhaseSucceeded), fc.explain("web-apart"))
	})
})
