package controller

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/provision"
)

var _ = Describe("Capacity requests", func() {
	var fc *fakeCluster
	BeforeEach(func() { fc = newFakeCluster() })

	// seed000 is incident 000 with one data node, shared by the search
	// engine and the graph DB, and a migration that may ask for capacity.
	seed000 := func(mode pgv1.ProvisionMode) {
		fc.node("data-1", map[string]string{"role": "data"})
		fc.deployment("search", 1, onRole("data"))
		fc.rollOut("search", "data-1")
		fc.deployment("graphdb", 1, onRole("data"))
		fc.rollOut("graphdb", "data-1")
		fc.migration("graphdb-apart", pgv1.PlacementMigrationSpec{
			Targets:    targetsNamed("graphdb"),
			Constraint: hostnameAntiAffinity(map[string]string{"app": "search"}),
			Capacity: &pgv1.Capacity{NodeSelector: pgv1.Labels(map[string]string{"role": "data"}),
				Provision: &pgv1.Provision{Mode: mode, MaxNodes: ptr.To[int32](2)}},
		})
	}
	placeholders := func() (*appsv1.Deployment, error) {
		d := &appsv1.Deployment{}
		return d, k8sClient.Get(ctx, client.ObjectKey{Namespace: fc.ns, Name: "graphdb-apart-capacity"}, d)
	}
	gone := func() bool {
		_, err := placeholders()
		return apierrors.IsNotFound(err)
	}
	request := func() *pgv1.CapacityRequestStatus {
		if c := fc.pm("graphdb-apart").Status.Capacity; c != nil {
			return c.Request
		}
		return nil
	}
	setPaused := func(paused bool) {
		pm := fc.pm("graphdb-apart")
		patch := client.MergeFrom(pm.DeepCopy())
		pm.Spec.Paused = paused
		Expect(k8sClient.Patch(ctx, pm, patch)).To(Succeed())
	}

	It("records placeholder pods before creating them, lets them go while paused, and deletes them once the node qualifies", func() {
		seed000(pgv1.ProvisionPlaceholderPods)

		By("asking for one data node with one placeholder shaped like a graph DB pod")
		var d *appsv1.Deployment
		Eventually(func(g Gomega) {
			var err error
			d, err = placeholders()
			g.Expect(err).NotTo(HaveOccurred())
		}).Should(Succeed(), fc.explain("graphdb-apart"))
		pm := fc.pm("graphdb-apart")
		Expect(pm.Status.Phase).To(Equal(pgv1.PhaseWaitingForCapacity))
		Expect(d.Spec.Replicas).To(Equal(ptr.To[int32](1)))
		Expect(d.OwnerReferences).To(ConsistOf(And(HaveField("UID", pm.UID), HaveField("Controller", ptr.To(true)))))
		tmpl := d.Spec.Template
		Expect(tmpl.Spec.PriorityClassName).To(Equal(provision.PriorityClassName))
		Expect(tmpl.Annotations).To(HaveKeyWithValue("karpenter.sh/do-not-disrupt", "true"))
		Expect(tmpl.Labels).To(Equal(map[string]string{placement.PlaceholderLabel: string(pm.UID)}))
		Expect(tmpl.Spec.Containers[0].Resources.Requests).To(HaveKey(corev1.ResourceCPU))
		Expect(tmpl.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution).To(ContainElement(
			HaveField("LabelSelector.MatchLabels", map[string]string{"app": "search"})), "the constraint at its final strength")
		Eventually(request).Should(And(Not(BeNil()), HaveField("Kind", "Deployment"), HaveField("Replicas", int32(1)),
			HaveField("Shortfall", int32(1)), HaveField("BaselineNodes", int32(1))))
		Eventually(func() metav1.Condition { return fc.condition("graphdb-apart", pgv1.ConditionCapacityRequested) }).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", pgv1.ReasonCapacityRequested)))
		Expect(fc.condition("graphdb-apart", pgv1.ConditionCapacityAvailable).Message).To(ContainSubstring("through Deployment graphdb-apart-capacity"))

		By("a request deleted behind the operator's back is made again")
		Expect(k8sClient.Delete(ctx, d)).To(Succeed())
		Eventually(func() error { _, err := placeholders(); return err }, "15s").Should(Succeed())

		By("a target's rollout paused holds the stage, and the request made for it stands")
		pauseTarget := func(paused bool) {
			g := fc.get("graphdb")
			patch := client.MergeFrom(g.DeepCopy())
			g.Spec.Paused = paused
			Expect(k8sClient.Patch(ctx, g, patch)).To(Succeed())
		}
		pauseTarget(true)
		Eventually(func() metav1.Condition { return fc.condition("graphdb-apart", pgv1.ConditionReady) }).Should(And(
			HaveField("Reason", pgv1.ReasonTargetPaused), HaveField("Message", ContainSubstring("through Deployment graphdb-apart-capacity"))), fc.explain("graphdb-apart"))
		Expect(fc.phase("graphdb-apart")()).To(Equal(pgv1.PhaseWaitingForCapacity))
		Consistently(func() error { _, err := placeholders(); return err }, "2s").Should(Succeed())
		Expect(request()).NotTo(BeNil())
		Expect(fc.eventReasons("graphdb-apart")()).NotTo(ContainElement("CapacityRequestDeleted"))
		pauseTarget(false)
		fc.reportRolledOut("graphdb")
		Eventually(func() metav1.Condition { return fc.condition("graphdb-apart", pgv1.ConditionReady) }).Should(
			HaveField("Reason", pgv1.ReasonWaitingForCapacity), fc.explain("graphdb-apart"))

		By("paused, the migration asks for nothing")
		setPaused(true)
		Eventually(gone).Should(BeTrue())
		Eventually(request).Should(BeNil())
		Expect(fc.condition("graphdb-apart", pgv1.ConditionCapacityRequested).Type).To(BeEmpty())
		Eventually(fc.eventReasons("graphdb-apart")).Should(ContainElement("CapacityRequestDeleted"))

		By("resumed, it asks again")
		setPaused(false)
		Eventually(func() error { _, err := placeholders(); return err }).Should(Succeed())

		By("a dry run asks for nothing")
		pm = fc.pm("graphdb-apart")
		patch := client.MergeFrom(pm.DeepCopy())
		pm.Spec.DryRun = true
		Expect(k8sClient.Patch(ctx, pm, patch)).To(Succeed())
		Eventually(gone).Should(BeTrue())
		Eventually(fc.phase("graphdb-apart")).Should(Equal(pgv1.PhaseWaitingForCapacity))
		Consistently(gone, "1s").Should(BeTrue())
		pm = fc.pm("graphdb-apart")
		patch = client.MergeFrom(pm.DeepCopy())
		pm.Spec.DryRun = false
		Expect(k8sClient.Patch(ctx, pm, patch)).To(Succeed())
		Eventually(func() error { _, err := placeholders(); return err }).Should(Succeed())

		By("the node joins: the request is deleted before the soft stage")
		fc.node("data-2", map[string]string{"role": "data"})
		Eventually(gone).Should(BeTrue())
		Eventually(fc.phase("graphdb-apart")).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain("graphdb-apart"))
		Expect(request()).To(BeNil())
	})

	It("resizes the request when the shortfall changes, within maxNodes", func() {
		seed000(pgv1.ProvisionPlaceholderPods)
		edit := func(minNodes, maxNodes int32) {
			pm := fc.pm("graphdb-apart")
			patch := client.MergeFrom(pm.DeepCopy())
			pm.Spec.Capacity.MinNodes = ptr.To(minNodes)
			pm.Spec.Capacity.Provision.MaxNodes = ptr.To(maxNodes)
			Expect(k8sClient.Patch(ctx, pm, patch)).To(Succeed())
		}
		replicas := func() int32 {
			d, err := placeholders()
			if err != nil || d.Spec.Replicas == nil {
				return -1
			}
			return *d.Spec.Replicas
		}
		Eventually(replicas).Should(Equal(int32(1)), fc.explain("graphdb-apart"))
		edit(4, 5)
		Eventually(replicas).Should(Equal(int32(3)), fc.explain("graphdb-apart"))
		Eventually(request).Should(HaveField("Shortfall", int32(3)))
		edit(4, 2)
		Eventually(replicas).Should(Equal(int32(2)), fc.explain("graphdb-apart"))
		Eventually(func() metav1.Condition { return fc.condition("graphdb-apart", pgv1.ConditionCapacityRequested) }).Should(And(
			HaveField("Reason", pgv1.ReasonRequestCapped), HaveField("Message", ContainSubstring("Asked for 2 of the 3 node(s) missing"))))
	})

	It("counts every node launched for any of its requests against maxNodes until the migration ends: a request needed again asks for nothing once maxNodes were launched, and says so", func() {
		// The request is made a few seconds before the node joins, as an
		// autoscaler takes them: a node of the request's own second is not
		// taken to be launched for it.
		testClock.SetTime(time.Now().Add(-3 * time.Second))
		seed000(pgv1.ProvisionPlaceholderPods)
		pm := fc.pm("graphdb-apart")
		patch := client.MergeFrom(pm.DeepCopy())
		pm.Spec.Capacity.Provision.MaxNodes = ptr.To[int32](1)
		Expect(k8sClient.Patch(ctx, pm, patch)).To(Succeed())
		Eventually(func() error { _, err := placeholders(); return err }).Should(Succeed(), fc.explain("graphdb-apart"))

		By("the node launched for it joins and qualifies: the request goes, the node stays counted, and a node of another pool that joined meanwhile is not counted")
		fc.node("app-9", map[string]string{"role": "app"})
		fc.node("data-2", map[string]string{"role": "data"})
		Eventually(gone).Should(BeTrue())
		Eventually(func() []string {
			if c := fc.pm("graphdb-apart").Status.Capacity; c != nil {
				return c.LaunchedNodes
			}
			return nil
		}).Should(Equal([]string{fc.ns + "-data-2"}), fc.explain("graphdb-apart"))

		By("before the hard stage more nodes are needed: nothing is asked for, as maxNodes 1 was launched already")
		Eventually(fc.phase("graphdb-apart")).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain("graphdb-apart"))
		pm = fc.pm("graphdb-apart")
		patch = client.MergeFrom(pm.DeepCopy())
		pm.Spec.Capacity.MinNodes = ptr.To[int32](3)
		Expect(k8sClient.Patch(ctx, pm, patch)).To(Succeed())
		fc.rollOut("graphdb", "data-2")
		Eventually(func() metav1.Condition { return fc.condition("graphdb-apart", pgv1.ConditionCapacityRequested) }).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", pgv1.ReasonMaxNodesReached),
			HaveField("Message", And(ContainSubstring("maxNodes is 1 over the whole migration"), ContainSubstring(fc.ns+"-data-2")))), fc.explain("graphdb-apart"))
		Expect(fc.pm("graphdb-apart").Status.Phase).To(Equal(pgv1.PhaseWaitingForCapacity))
		Consistently(gone, "2s").Should(BeTrue(), "no request is made again")
		Expect(request()).To(BeNil())

		By("the node leaves: it stays counted")
		Expect(k8sClient.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fc.ns + "-data-2"}})).To(Succeed())
		Consistently(gone, "2s").Should(BeTrue())
		Expect(fc.pm("graphdb-apart").Status.Capacity.LaunchedNodes).To(Equal([]string{fc.ns + "-data-2"}))

		By("raised maxNodes asks for what is left of it")
		pm = fc.pm("graphdb-apart")
		patch = client.MergeFrom(pm.DeepCopy())
		pm.Spec.Capacity.Provision.MaxNodes = ptr.To[int32](2)
		Expect(k8sClient.Patch(ctx, pm, patch)).To(Succeed())
		Eventually(func() int32 {
			d, err := placeholders()
			if err != nil || d.Spec.Replicas == nil {
				return -1
			}
			return *d.Spec.Replicas
		}).Should(Equal(int32(1)), fc.explain("graphdb-apart"))
	})

	It("asks for the surge room of one node where replicas equal nodes would deadlock the rollout (incident 001), instead of blocking", func() {
		fc.node("n1", nil)
		fc.node("n2", nil)
		fc.deployment("web", 2)
		fc.rollOut("web", "n1", "n2")
		fc.migration("web-apart", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameAntiAffinity(nil),
			Capacity: &pgv1.Capacity{Provision: &pgv1.Provision{Mode: pgv1.ProvisionPlaceholderPods, MaxNodes: ptr.To[int32](1)}}})

		Eventually(func() error {
			return k8sClient.Get(ctx, client.ObjectKey{Namespace: fc.ns, Name: "web-apart-capacity"}, &appsv1.Deployment{})
		}).Should(Succeed(), fc.explain("web-apart"))
		Expect(fc.pm("web-apart").Status.Phase).To(Equal(pgv1.PhaseWaitingForCapacity))
		Expect(fc.condition("web-apart", pgv1.ConditionCapacityAvailable).Message).To(And(
			ContainSubstring("surge room"), ContainSubstring("maxUnavailable")))
		Expect(fc.pm("web-apart").Status.Capacity.Request).To(HaveField("Replicas", int32(1)))
		Expect(fc.get("web").Generation).To(Equal(int64(1)), "nothing is patched while waiting")

		By("the third node joins: the rollout can surge, and the migration moves on")
		fc.node("n3", nil)
		Eventually(fc.phase("web-apart")).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain("web-apart"))
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: fc.ns, Name: "web-apart-capacity"}, &appsv1.Deployment{}))
		}).Should(BeTrue())
	})

	It("says so when the cluster serves no CapacityBuffer API, creates nothing, and waits as mode None does", func() {
		seed000(pgv1.ProvisionCapacityBuffer)
		Eventually(func() metav1.Condition { return fc.condition("graphdb-apart", pgv1.ConditionCapacityRequested) }).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", pgv1.ReasonAutoscalerAPIMissing),
			HaveField("Message", ContainSubstring("waits for nodes as with mode None"))), fc.explain("graphdb-apart"))
		Expect(fc.pm("graphdb-apart").Status.Phase).To(Equal(pgv1.PhaseWaitingForCapacity))
		Consistently(func() error {
			return k8sClient.Get(ctx, client.ObjectKey{Namespace: fc.ns, Name: "graphdb-apart-capacity"}, &corev1.PodTemplate{})
		}, "1s").Should(Satisfy(apierrors.IsNotFound), "a PodTemplate without its CapacityBuffer asks for nothing")

		By("the node joins anyway: the record is let go and the migration moves on")
		fc.node("data-2", map[string]string{"role": "data"})
		Eventually(fc.phase("graphdb-apart")).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain("graphdb-apart"))
		Expect(request()).To(BeNil())
		Expect(fc.condition("graphdb-apart", pgv1.ConditionCapacityRequested).Type).To(BeEmpty())
	})
})
