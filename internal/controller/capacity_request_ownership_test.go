package controller

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// A capacity request writes and deletes only what the migration created:
// an object of its name made by someone else is neither resized nor
// deleted, and a request that cannot be removed is said, never hidden
// behind the phase of the last reconcile that succeeded.
var _ = Describe("Capacity requests touch only what the migration made", func() {
	var fc *fakeCluster
	BeforeEach(func() { fc = newFakeCluster() })

	seed000 := func() {
		fc.node("data-1", map[string]string{"role": "data"})
		fc.deployment("search", 1, onRole("data"))
		fc.rollOut("search", "data-1")
		fc.deployment("graphdb", 1, onRole("data"))
		fc.rollOut("graphdb", "data-1")
	}
	migrate := func(name string) {
		fc.migration(name, pgv1.PlacementMigrationSpec{
			Targets:    targetsNamed("graphdb"),
			Constraint: hostnameAntiAffinity(map[string]string{"app": "search"}),
			Capacity: &pgv1.Capacity{NodeSelector: pgv1.Labels(map[string]string{"role": "data"}),
				Provision: &pgv1.Provision{Mode: pgv1.ProvisionPlaceholderPods, MaxNodes: ptr.To[int32](2)}},
		})
	}
	deployment := func(name string) (*appsv1.Deployment, error) {
		d := &appsv1.Deployment{}
		return d, k8sClient.Get(ctx, client.ObjectKey{Namespace: fc.ns, Name: name}, d)
	}

	It("leaves a Deployment someone else named <migration>-capacity alone, says so, and asks once the name is free", func() {
		seed000()
		theirs := fc.deployment("payments-capacity", 4, func(d *appsv1.Deployment) {
			d.Spec.Template.Labels["team"] = "payments"
		})
		migrate("payments")

		By("the request is refused, naming the object, and theirs keeps its size")
		Eventually(func() metav1.Condition { return fc.condition("payments", pgv1.ConditionCapacityRequested) }).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", pgv1.ReasonRequestNameTaken),
			HaveField("Message", And(ContainSubstring("Deployment "+fc.ns+"/payments-capacity already exists and is not this migration's"),
				ContainSubstring("left untouched")))), fc.explain("payments"))
		Expect(fc.pm("payments").Status.Phase).To(Equal(pgv1.PhaseWaitingForCapacity))
		Eventually(fc.eventReasons("payments")).Should(ContainElement(pgv1.ReasonRequestNameTaken))
		Consistently(func() *int32 {
			d, err := deployment("payments-capacity")
			Expect(err).NotTo(HaveOccurred())
			return d.Spec.Replicas
		}, "2s").Should(Equal(ptr.To[int32](4)))

		By("the node joins: the request is let go, and their Deployment is not deleted")
		fc.node("data-2", map[string]string{"role": "data"})
		Eventually(fc.phase("payments")).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain("payments"))
		Eventually(fc.eventReasons("payments")).Should(ContainElement("CapacityRequestDeleted"))
		d, err := deployment("payments-capacity")
		Expect(err).NotTo(HaveOccurred())
		Expect(d.UID).To(Equal(theirs.UID))
		Expect(d.Spec.Replicas).To(Equal(ptr.To[int32](4)))
	})

	It("makes the request once someone else's object of its name is gone", func() {
		seed000()
		d := &appsv1.Deployment{}
		fc.deployment("orders-capacity", 2)
		migrate("orders")
		Eventually(func() string { return fc.condition("orders", pgv1.ConditionCapacityRequested).Reason }).Should(Equal(pgv1.ReasonRequestNameTaken))

		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: fc.ns, Name: "orders-capacity"}, d)).To(Succeed())
		Expect(k8sClient.Delete(ctx, d)).To(Succeed())
		Eventually(func(g Gomega) {
			mine, err := deployment("orders-capacity")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(mine.OwnerReferences).To(ContainElement(HaveField("UID", fc.pm("orders").UID)))
			g.Expect(mine.Spec.Replicas).To(Equal(ptr.To[int32](1)))
		}, "30s").Should(Succeed(), fc.explain("orders"))
		Eventually(func() string { return fc.condition("orders", pgv1.ConditionCapacityRequested).Reason }).Should(Equal(pgv1.ReasonCapacityRequested))
	})

	It("gives two long migration names sharing a prefix requests of their own", func() {
		seed000()
		prefix := strings.Repeat("graphdb-apart-from-search-", 9)
		a, b := prefix+"blue-cluster", prefix+"green-cluster"
		Expect(len(a)).To(BeNumerically(">", 253-len("-capacity")))
		migrate(a)
		Eventually(func() *pgv1.CapacityRequestStatus {
			if c := fc.pm(a).Status.Capacity; c != nil {
				return c.Request
			}
			return nil
		}).ShouldNot(BeNil(), fc.explain(a))
		Eventually(func() string { return fc.condition(a, pgv1.ConditionCapacityRequested).Reason }).Should(Equal(pgv1.ReasonCapacityRequested), fc.explain(a))

		pmB := &pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Namespace: fc.ns, Name: b}, Spec: fc.pm(a).Spec}
		pmB.Spec.Targets = targetsNamed("search")
		pmB.Spec.Constraint = hostnameAntiAffinity(map[string]string{"app": "graphdb"})
		Expect(k8sClient.Create(ctx, pmB)).To(Succeed())
		Eventually(func() string { return fc.condition(b, pgv1.ConditionCapacityRequested).Reason }).Should(Equal(pgv1.ReasonCapacityRequested), fc.explain(b))
		nameA, nameB := fc.pm(a).Status.Capacity.Request.Name, fc.pm(b).Status.Capacity.Request.Name
		Expect(nameA).NotTo(Equal(nameB))
		for _, n := range []string{nameA, nameB} {
			Expect(len(n)).To(BeNumerically("<=", 253))
			// The request's name is recorded before it is created.
			Eventually(func() error { _, err := deployment(n); return err }).Should(Succeed(), n)
		}
	})

	It("says when a request no longer needed cannot be removed, records the stage it moved on to, and removes it once it can", func() {
		seed000()
		// The API server refuses to delete this namespace's placeholders,
		// as a policy or a webhook of the cluster might.
		policy := &admissionv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "no-delete-" + fc.ns},
			Spec: admissionv1.ValidatingAdmissionPolicySpec{
				FailurePolicy: ptr.To(admissionv1.Fail),
				MatchConstraints: &admissionv1.MatchResources{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": fc.ns}},
					ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
						Operations: []admissionv1.OperationType{admissionv1.Delete},
						Rule:       admissionv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
					}}},
				},
				Validations: []admissionv1.Validation{{Expression: "false", Message: "deleting Deployments is frozen here"}},
			},
		}
		binding := &admissionv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
			Spec:       admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy.Name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
		}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		Expect(k8sClient.Create(ctx, binding)).To(Succeed())
		unfreeze := func() {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, binding))).To(Succeed())
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, policy))).To(Succeed())
		}
		DeferCleanup(unfreeze)
		// The API server loads a policy asynchronously: wait until it acts.
		probe := func() error {
			d := &appsv1.Deployment{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: fc.ns, Name: "probe"}, d); apierrors.IsNotFound(err) {
				d = fc.deployment("probe", 0)
			}
			return k8sClient.Delete(ctx, d)
		}
		Eventually(probe).Should(MatchError(ContainSubstring("frozen here")))
		migrate("graphdb-apart")
		Eventually(func() error { _, err := deployment("graphdb-apart-capacity"); return err }).Should(Succeed(), fc.explain("graphdb-apart"))

		By("the node joins: the stage goes on, and the request that could not go is named")
		fc.node("data-2", map[string]string{"role": "data"})
		Eventually(func(g Gomega) {
			pm := fc.pm("graphdb-apart")
			g.Expect(pm.Status.Phase).NotTo(Equal(pgv1.PhaseWaitingForCapacity))
			c := fc.condition("graphdb-apart", pgv1.ConditionCapacityRequested)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(pgv1.ReasonRequestRemovalFailed))
			g.Expect(c.Message).To(And(ContainSubstring("could not be removed"), ContainSubstring("frozen here")))
			g.Expect(pm.Status.Capacity.Request).NotTo(BeNil(), "the record stays until the request is gone")
		}).Should(Succeed(), fc.explain("graphdb-apart"))
		Eventually(fc.eventReasons("graphdb-apart")).Should(ContainElement(pgv1.ReasonRequestRemovalFailed))

		By("once deleting is allowed again, the request goes and the condition with it")
		unfreeze()
		Eventually(probe).Should(Succeed())
		Eventually(func() bool {
			_, err := deployment("graphdb-apart-capacity")
			return apierrors.IsNotFound(err)
		}, "30s").Should(BeTrue())
		Eventually(func() string { return fc.condition("graphdb-apart", pgv1.ConditionCapacityRequested).Type }).Should(BeEmpty())
		Expect(fmt.Sprint(fc.pm("graphdb-apart").Status.Capacity)).NotTo(ContainSubstring("graphdb-apart-capacity"))
	})
})
