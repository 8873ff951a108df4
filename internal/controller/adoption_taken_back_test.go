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
	"github.com/placement-guard/placement-guard/internal/adoption"
)

// An adopted constraint belongs to its workload: when a writer the
// admission check did not see takes it out, the reconciler ends the
// adoption instead of writing the constraint back as drift. Here the
// adoption controller does not run, so nothing but the reconciler acts.
var _ = Describe("An adopted constraint taken back unseen", func() {
	var fc *fakeCluster
	BeforeEach(func() { fc = newFakeCluster() })

	// adopted makes the state the admission check leaves: a record on the
	// Deployment and the migration it owns, driven to a verified soft stage.
	adopted := func(workload string) (string, adoption.Record) {
		fc.node("n1", nil)
		fc.node("n2", nil)
		rec := adoption.Record{Migration: workload + "-adopted-1a2b", Author: "gitops", Term: &corev1.PodAffinityTerm{
			TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": workload}}}}
		value, err := adoption.Encode([]adoption.Record{rec})
		Expect(err).NotTo(HaveOccurred())
		d := fc.deployment(workload, 1, func(d *appsv1.Deployment) {
			d.Annotations = map[string]string{adoption.Annotation: value}
		})
		fc.rollOut(workload, "n1")
		pm := &pgv1.PlacementMigration{
			ObjectMeta: metav1.ObjectMeta{Namespace: fc.ns, Name: rec.Migration, Labels: map[string]string{adoption.AdoptedLabel: workload},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: workload, UID: d.UID, Controller: ptr.To(true)}}},
			Spec: pgv1.PlacementMigrationSpec{Targets: targetsNamed(workload), Constraint: rec.Constraint(), FinalStage: pgv1.StageSoft,
				StageTimeout: &metav1.Duration{Duration: 15 * time.Minute}, SoakDuration: &metav1.Duration{},
				Guards: &pgv1.Guards{MinPodAge: &metav1.Duration{}}},
		}
		Expect(k8sClient.Create(ctx, pm)).To(Succeed())
		Eventually(fc.phase(pm.Name)).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain(pm.Name))
		fc.rollOut(workload, "n1")
		Eventually(fc.phase(pm.Name)).Should(Equal(pgv1.PhaseSucceeded), fc.explain(pm.Name))
		// Managed fields record time to the second: the take-back must be
		// the newest write for the reconciler to name its writer.
		created := fc.get(workload).CreationTimestamp
		Eventually(func() bool { return time.Now().After(created.Add(time.Second)) }).Should(BeTrue())
		return pm.Name, rec
	}
	takenBack := func(name string) func() metav1.Condition {
		return func() metav1.Condition { return fc.condition(name, pgv1.ConditionConstraintInSync) }
	}
	neverWrittenBack := func(workload, name string) {
		stepAndLook(fc, name, time.Hour)
		Consistently(func() *corev1.PodAntiAffinity { return fc.antiAffinityOf(workload) }, "2s").Should(BeNil(), "the constraint was written back")
		Expect(fc.pm(name).Status.DriftCorrections).To(BeZero())
	}

	It("marks the record ended by the writer and writes nothing back", func() {
		name, _ := adopted("ledger")
		d := fc.get("ledger")
		d.Spec.Template.Spec.Affinity = nil
		// A write that only removes fields owns none, and leaves no trace
		// in managed fields: the editor's note makes it the newest.
		d.Annotations["example.com/edited"] = "without the anti-affinity"
		Expect(k8sClient.Update(ctx, d, client.FieldOwner("kubectl-edit"))).To(Succeed())

		Eventually(takenBack(name)).Should(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", pgv1.ReasonAdoptionTakenBack),
			HaveField("Message", ContainSubstring(`field manager "kubectl-edit" took it out`))))
		rec, err := adoption.Find(fc.get("ledger").Annotations, name)
		Expect(err).NotTo(HaveOccurred())
		Expect(rec).NotTo(BeNil())
		Expect(rec.Ended).To(Equal("taken back by kubectl-edit"))
		Eventually(fc.eventReasons(name)).Should(ContainElement(pgv1.ReasonAdoptionTakenBack))
		neverWrittenBack("ledger", name)
	})

	It("writes nothing back when the take-back removed the record with the constraint, as kubectl rollout undo does", func() {
		name, _ := adopted("queue")
		d := fc.get("queue")
		d.Spec.Template.Spec.Affinity = nil
		d.Annotations = map[string]string{"deployment.kubernetes.io/revision": "1"}
		Expect(k8sClient.Update(ctx, d, client.FieldOwner("kubectl-rollout"))).To(Succeed())

		Eventually(takenBack(name)).Should(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", pgv1.ReasonAdoptionTakenBack),
			HaveField("Message", ContainSubstring("its adopted constraint"))))
		Expect(fc.get("queue").Annotations).NotTo(HaveKey(adoption.Annotation), "no record is made up")
		neverWrittenBack("queue", name)
	})
})
