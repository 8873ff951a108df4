package adopt

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/adoption"
	"github.com/placement-guard/placement-guard/internal/testenv"
)

// The adoption controller's specs run against a real API server (envtest)
// and call Reconcile themselves, as the manager would on a workload's or a
// migration's change: what it makes, marks and deletes is the API
// server's to say.

var (
	ctx       context.Context
	k8sClient client.Client
)

func TestAdopt(t *testing.T) { testenv.Run(t, "Adoption Suite") }

var _ = BeforeSuite(func() {
	env := testenv.Start([]string{filepath.Join("..", "..", "..", "config", "crd", "bases")}, pgv1.AddToScheme)
	ctx, k8sClient = env.Ctx, env.Client
})

var _ = Describe("Adopt mode's migrations", func() {
	var (
		ns       string
		recorder *events.FakeRecorder
		r        *Reconciler
		record   adoption.Record
	)

	// workloadWith creates a Deployment carrying the records, as the
	// admission check leaves one it admitted soft.
	workloadWith := func(name string, annotation string) *appsv1.Deployment {
		labels := map[string]string{"app": name}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{adoption.Annotation: annotation}},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
				},
			},
		}
		Expect(k8sClient.Create(ctx, d)).To(Succeed())
		return d
	}
	reconcile := func(name string) {
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
		Expect(err).NotTo(HaveOccurred())
	}
	recordsOf := func(name string) []adoption.Record {
		d := &appsv1.Deployment{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d)).To(Succeed())
		recs, err := adoption.Records(d.Annotations)
		Expect(err).NotTo(HaveOccurred())
		return recs
	}
	migrations := func() []pgv1.PlacementMigration {
		var list pgv1.PlacementMigrationList
		Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		return list.Items
	}
	nextEvent := func() string {
		select {
		case e := <-recorder.Events:
			return e
		default:
			return ""
		}
	}

	BeforeEach(func() {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "adopt-"}}
		Expect(k8sClient.Create(ctx, n)).To(Succeed())
		ns = n.Name
		recorder = events.NewFakeRecorder(20)
		r = &Reconciler{Client: k8sClient, APIReader: k8sClient, Recorder: recorder}
		record = adoption.Record{
			Term: &corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "search"}}},
			Author: "helm",
		}
	})

	It("makes a record's migration once, owned by the workload, and marks the record with it", func() {
		record.Migration = adoption.MigrationName("Deployment", "graphdb", record)
		value, err := adoption.Encode([]adoption.Record{record})
		Expect(err).NotTo(HaveOccurred())
		d := workloadWith("graphdb", value)

		reconcile("graphdb")
		made := migrations()
		Expect(made).To(HaveLen(1))
		pm := made[0]
		Expect(pm.Name).To(Equal(record.Migration))
		Expect(metav1.IsControlledBy(&pm, d)).To(BeTrue())
		Expect(pm.Labels).To(HaveKeyWithValue(adoption.AdoptedLabel, "graphdb"))
		Expect(pm.Spec.Targets).To(Equal([]pgv1.TargetRef{{Kind: pgv1.KindDeployment, Name: "graphdb"}}))
		Expect(pm.Spec.Constraint.PodAntiAffinity).NotTo(BeNil())
		Expect(pm.Spec.Constraint.PodAntiAffinity.TopologyKey).To(Equal(corev1.LabelHostname))
		Expect(recordsOf("graphdb")).To(ConsistOf(HaveField("Made", string(pm.UID))))
		Expect(nextEvent()).To(ContainSubstring(ReasonAdopted))

		By("a second reconcile makes nothing and writes nothing")
		before := &appsv1.Deployment{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(d), before)).To(Succeed())
		reconcile("graphdb")
		after := &appsv1.Deployment{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(d), after)).To(Succeed())
		Expect(after.ResourceVersion).To(Equal(before.ResourceVersion))
		Expect(migrations()).To(HaveLen(1))
		Expect(nextEvent()).To(BeEmpty())
	})

	It("ends the adoption when a person deletes its migration, and never makes it again", func() {
		record.Migration = adoption.MigrationName("Deployment", "ledger", record)
		value, err := adoption.Encode([]adoption.Record{record})
		Expect(err).NotTo(HaveOccurred())
		workloadWith("ledger", value)
		reconcile("ledger")
		Expect(migrations()).To(HaveLen(1))
		nextEvent()

		pm := migrations()[0]
		Expect(k8sClient.Delete(ctx, &pm)).To(Succeed())
		reconcile("ledger")
		recs := recordsOf("ledger")
		Expect(recs).To(HaveLen(1))
		Expect(recs[0].Active()).To(BeFalse())
		Expect(recs[0].Ended).To(ContainSubstring("deleted"))
		Expect(nextEvent()).To(ContainSubstring(ReasonAdoptionEnded))

		reconcile("ledger")
		Expect(migrations()).To(BeEmpty())
	})

	It("deletes the migration of a record its workload no longer carries", func() {
		record.Migration = adoption.MigrationName("Deployment", "cache", record)
		value, err := adoption.Encode([]adoption.Record{record})
		Expect(err).NotTo(HaveOccurred())
		d := workloadWith("cache", value)
		reconcile("cache")
		Expect(migrations()).To(HaveLen(1))
		nextEvent()

		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
		patch := client.MergeFrom(d.DeepCopy())
		d.Annotations[adoption.Annotation] = "[]"
		Expect(k8sClient.Patch(ctx, d, patch)).To(Succeed())
		reconcile("cache")
		Eventually(func() []pgv1.PlacementMigration {
			var live []pgv1.PlacementMigration
			for _, pm := range migrations() {
				if pm.DeletionTimestamp.IsZero() {
					live = append(live, pm)
				}
			}
			return live
		}).Should(BeEmpty())
		Expect(nextEvent()).To(ContainSubstring(ReasonAdoptionDropped))
	})

	It("says when a workload's records do not parse, and makes nothing", func() {
		workloadWith("broken", "{not json")
		reconcile("broken")
		Expect(migrations()).To(BeEmpty())
		e := nextEvent()
		Expect(e).To(ContainSubstring("Warning " + ReasonAdoptionFails))
		Expect(strings.Contains(e, "stay soft")).To(BeTrue())
	})
})
