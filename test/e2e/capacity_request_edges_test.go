package e2e

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/test/utils"
)

// A capacity request at its edges, with the admission policies of
// config/policies in force (the suite installs them): a name someone else
// took, a namespace that enforces the restricted Pod Security Standard,
// and a namespace where the operator may not create Deployments.
var _ = Describe("Capacity requests at their edges", Label("operator", "edges", "capacity-request"), func() {
	BeforeEach(func(ctx SpecContext) { installPlaceholderPriorityClass(ctx) })

	It("leaves a running Deployment someone else named <migration>-capacity alone: not resized, not deleted, named in the condition", func(ctx SpecContext) {
		env := newEnv(ctx, "request-taken")
		Expect(utils.BindPlaceholderRole(ctx, k8sClient, env.Namespace)).To(Succeed())
		seed000(ctx, env)
		payments := utils.Deployment(env.Namespace, "graphdb-apart-capacity", env.Pool(), 2, nil)
		payments.Spec.Template.Spec.NodeSelector["role"] = "app"
		Expect(k8sClient.Create(ctx, payments)).To(Succeed())
		allRunning(ctx, env.Namespace, map[string]string{"app": "graphdb-apart-capacity"}, 2)
		theirs := incarnations(ctx, env.Namespace, map[string]string{"app": "graphdb-apart-capacity"})

		migration(ctx, env.Namespace, "graphdb-apart", seed000Spec(pgv1.ProvisionPlaceholderPods, 1))
		Eventually(func() metav1.Condition {
			return conditionOf(ctx, env.Namespace, "graphdb-apart", pgv1.ConditionCapacityRequested)
		}).Should(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", pgv1.ReasonRequestNameTaken),
			HaveField("Message", ContainSubstring("Deployment "+env.Namespace+"/graphdb-apart-capacity already exists and is not this migration's"))),
			explain(ctx, env.Namespace, "graphdb-apart"))
		Expect(getMigration(ctx, env.Namespace, "graphdb-apart").Status.Phase).To(Equal(pgv1.PhaseWaitingForCapacity))

		By("the capacity arrives: the migration succeeds, and their Deployment keeps its size and pods")
		_, err := env.AddNode(ctx, "data-2", map[string]string{"role": "data"})
		Expect(err).NotTo(HaveOccurred())
		Eventually(phaseOf(ctx, env.Namespace, "graphdb-apart")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "graphdb-apart"))
		d := &appsv1.Deployment{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(payments), d)).To(Succeed())
		Expect(d.UID).To(Equal(payments.UID))
		Expect(d.Spec.Replicas).To(Equal(ptr.To[int32](2)))
		Expect(d.Generation).To(Equal(int64(1)), "never written by the operator")
		Expect(incarnations(ctx, env.Namespace, map[string]string{"app": "graphdb-apart-capacity"})).To(Equal(theirs))
	})

	It("runs placeholder pods in a namespace that enforces the restricted standard, under the policies, and removes them once the node qualifies", func(ctx SpecContext) {
		env := newEnv(ctx, "request-restricted")
		ns := &corev1.Namespace{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: env.Namespace}, ns)).To(Succeed())
		patch := client.MergeFrom(ns.DeepCopy())
		ns.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
		Expect(k8sClient.Patch(ctx, ns, patch)).To(Succeed())
		Expect(utils.BindPlaceholderRole(ctx, k8sClient, env.Namespace)).To(Succeed())
		seed000(ctx, env, utils.Restricted)
		migration(ctx, env.Namespace, "graphdb-apart", seed000Spec(pgv1.ProvisionPlaceholderPods, 1))

		By("the placeholder pod is admitted, and waits for a node no autoscaler brings here")
		Eventually(func(g Gomega) {
			var placeholders corev1.PodList
			g.Expect(k8sClient.List(ctx, &placeholders, client.InNamespace(env.Namespace), client.HasLabels{"placementguard.io/capacity-request"})).To(Succeed())
			g.Expect(placeholders.Items).To(HaveLen(1))
			c := conditionOf(ctx, env.Namespace, "graphdb-apart", pgv1.ConditionCapacityRequested)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
			g.Expect(c.Reason).To(Equal(pgv1.ReasonCapacityRequested))
		}).Should(Succeed(), explain(ctx, env.Namespace, "graphdb-apart"))

		By("the node joins: the request goes, and the migration succeeds")
		_, err := env.AddNode(ctx, "data-2", map[string]string{"role": "data"})
		Expect(err).NotTo(HaveOccurred())
		Eventually(phaseOf(ctx, env.Namespace, "graphdb-apart")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "graphdb-apart"))
		Eventually(func() bool { return exists(ctx, deploymentGVK, env.Namespace, "graphdb-apart-capacity") }).Should(BeFalse())
	})

	It("says which role to bind where the operator may not create placeholder Deployments, and creates nothing", func(ctx SpecContext) {
		env := newEnv(ctx, "request-unbound")
		seed000(ctx, env)
		migration(ctx, env.Namespace, "graphdb-apart", seed000Spec(pgv1.ProvisionPlaceholderPods, 1))
		Eventually(func() metav1.Condition {
			return conditionOf(ctx, env.Namespace, "graphdb-apart", pgv1.ConditionCapacityRequested)
		}).Should(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", pgv1.ReasonRequestFailed),
			HaveField("Message", And(ContainSubstring("forbidden"), ContainSubstring("placement-guard-placeholders"), ContainSubstring("namespace "+env.Namespace)))),
			explain(ctx, env.Namespace, "graphdb-apart"))
		Expect(exists(ctx, deploymentGVK, env.Namespace, "graphdb-apart-capacity")).To(BeFalse())
		Expect(getMigration(ctx, env.Namespace, "graphdb-apart").Status.Phase).To(Equal(pgv1.PhaseWaitingForCapacity))
	})
})
