package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/adoption"
	"github.com/placement-guard/placement-guard/internal/controller/adopt"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// The in-place write of an adopted constraint on its worst days: written
// again after a crash that lost the journal's record of it, raced by
// another writer, and rolled back and forth.
var _ = Describe("An adopted constraint written in place", func() {
	var (
		ns       string
		manifest *corev1.PodSpec
		rec      adoption.Record
		hard     *corev1.PodSpec
		soft     *corev1.PodSpec
	)
	BeforeEach(func() {
		namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "adopted-"}}
		Expect(k8sClient.Create(ctx, namespace)).To(Succeed())
		ns = namespace.Name
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, namespace))).To(Succeed()) })
		term := corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "search"}}}
		// The manifest's soft term stays first; the adopted hard term was
		// written second.
		manifest = &corev1.PodSpec{
			Containers: []corev1.Container{{Name: "db", Image: "registry.invalid/graphdb:1"}},
			Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term},
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 10, PodAffinityTerm: corev1.PodAffinityTerm{
					TopologyKey: corev1.LabelTopologyZone, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "graphdb"}}}}},
			}},
		}
		softened := adoption.Soften("Deployment", "graphdb", nil, manifest)
		Expect(softened.Records).To(HaveLen(1))
		rec = softened.Records[0]
		value, err := adoption.Encode(softened.Records)
		Expect(err).NotTo(HaveOccurred())
		labels := map[string]string{"app": "graphdb"}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "graphdb", Annotations: map[string]string{adoption.Annotation: value}},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: *softened.Spec},
			},
		}
		Expect(k8sClient.Create(ctx, d)).To(Succeed())
		c := planning.ConstraintFromSpec(rec.Constraint()).ForWorkload(pgv1.KindDeployment)
		own := &metav1.LabelSelector{MatchLabels: labels}
		hard, err = c.Entry(own, pgv1.StageHard)
		Expect(err).NotTo(HaveOccurred())
		soft, err = c.Entry(own, pgv1.StageSoft)
		Expect(err).NotTo(HaveOccurred())
	})

	reconciler := func(c client.Client) *PlacementMigrationReconciler {
		return &PlacementMigrationReconciler{Client: c, APIReader: c, Scheme: scheme}
	}
	migration := func() *pgv1.PlacementMigration {
		return &pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rec.Migration}}
	}
	live := func() *appsv1.Deployment {
		d := &appsv1.Deployment{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "graphdb"}, d)).To(Succeed())
		return d
	}
	target := func() *pgv1.OperationTarget {
		return &pgv1.OperationTarget{Kind: pgv1.KindDeployment, Name: "graphdb", UID: string(live().UID)}
	}
	const manager = "placement-guard/adopted"

	It("writes nothing more when the hard stage is written again after a crash", func() {
		r := reconciler(k8sClient)
		generation, adopted, err := r.writeAdopted(ctx, migration(), target(), hard, manager, "")
		Expect(err).NotTo(HaveOccurred())
		Expect(adopted).To(BeTrue())
		after := live()
		Expect(after.Spec.Template.Spec.Affinity).To(Equal(manifest.Affinity), "the hard form is back where the manifest had it")
		Expect(after.Generation).To(Equal(generation))

		// The operator died before the journal recorded the write: the
		// resumed operation writes the same stage again.
		again, adopted, err := r.writeAdopted(ctx, migration(), target(), hard, manager, "")
		Expect(err).NotTo(HaveOccurred())
		Expect(adopted).To(BeTrue())
		Expect(again).To(Equal(generation), "a second write of the same stage changes no generation: no second rollout")
		Expect(live().Spec.Template).To(Equal(after.Spec.Template))
		Expect(live().ResourceVersion).To(Equal(after.ResourceVersion), "nothing was written at all")
	})

	It("never overwrites another writer's change made between its read and its write", func() {
		raced := false
		c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		racing := interceptor.NewClient(c, interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if !raced {
				raced = true
				// A Helm upgrade lands between the operator's read and its
				// patch.
				d := live()
				d.Spec.Template.Spec.Containers[0].Image = "registry.invalid/graphdb:2"
				Expect(k8sClient.Update(ctx, d)).To(Succeed())
			}
			return c.Patch(ctx, obj, patch, opts...)
		}})
		r := reconciler(racing)
		_, _, err = r.writeAdopted(ctx, migration(), target(), hard, manager, "")
		Expect(apierrors.IsConflict(err)).To(BeTrue(), "the write carries the resourceVersion it read: %v", err)
		Expect(live().Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution).To(BeEmpty(), "nothing of the stale write landed")

		_, _, err = r.writeAdopted(ctx, migration(), target(), hard, manager, "")
		Expect(err).NotTo(HaveOccurred())
		d := live()
		Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal("registry.invalid/graphdb:2"), "the other writer's change is kept")
		Expect(d.Spec.Template.Spec.Affinity).To(Equal(manifest.Affinity))
	})

	It("rolls back to the soft form and hardens again to the manifest, as many times as it is asked", func() {
		r := reconciler(k8sClient)
		for i := range 3 {
			By(fmt.Sprintf("round %d", i+1))
			_, _, err := r.writeAdopted(ctx, migration(), target(), hard, manager, "")
			Expect(err).NotTo(HaveOccurred())
			Expect(live().Spec.Template.Spec.Affinity).To(Equal(manifest.Affinity))
			_, _, err = r.writeAdopted(ctx, migration(), target(), soft, manager, "")
			Expect(err).NotTo(HaveOccurred())
			spec := live().Spec.Template.Spec
			Expect(spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution).To(BeEmpty())
			Expect(spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution).To(HaveLen(2), "the manifest's own soft term and the adopted one, nothing doubled")
			Expect(spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0]).To(Equal(manifest.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0]))
		}
	})

	It("reverts a hardened adopted constraint to its soft form, never strips it, and ends the adoption in the same write", func() {
		r := reconciler(k8sClient)
		_, _, err := r.writeAdopted(ctx, migration(), target(), hard, manager, "")
		Expect(err).NotTo(HaveOccurred())
		Expect(live().Spec.Template.Spec.Affinity).To(Equal(manifest.Affinity))

		_, adopted, err := r.writeAdopted(ctx, migration(), target(), nil, manager, "PlacementMigration "+rec.Migration+" aborted")
		Expect(err).NotTo(HaveOccurred())
		Expect(adopted).To(BeTrue())
		d := live()
		paa := d.Spec.Template.Spec.Affinity.PodAntiAffinity
		Expect(paa.RequiredDuringSchedulingIgnoredDuringExecution).To(BeEmpty())
		Expect(paa.PreferredDuringSchedulingIgnoredDuringExecution).To(ContainElement(HaveField("Weight", placement.SoftWeight)),
			"the form Adopt admitted stays: the manifest asked for the constraint")
		records, err := adoption.Records(d.Annotations)
		Expect(err).NotTo(HaveOccurred())
		Expect(records).To(ConsistOf(And(HaveField("Migration", rec.Migration), HaveField("Ended", "PlacementMigration "+rec.Migration+" aborted"))))
	})

	It("leaves a workload of the same name made again alone", func() {
		ot := target()
		Expect(k8sClient.Delete(ctx, live())).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "graphdb"}, &appsv1.Deployment{}))
		}).Should(BeTrue())
		again := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "graphdb", Annotations: map[string]string{}},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "graphdb"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "graphdb"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "registry.invalid/graphdb:1"}}}},
			},
		}
		value, err := adoption.Encode([]adoption.Record{rec})
		Expect(err).NotTo(HaveOccurred())
		again.Annotations[adoption.Annotation] = value
		Expect(k8sClient.Create(ctx, again)).To(Succeed())
		_, adopted, err := reconciler(k8sClient).writeAdopted(ctx, migration(), ot, hard, manager, "")
		Expect(err).NotTo(HaveOccurred())
		Expect(adopted).To(BeFalse(), "the recorded uid is the old workload's: the migration's own apply, with its uid precondition, answers")
		Expect(live().Spec.Template.Spec.Affinity).To(BeNil())
	})
})

// Two replicas of the manager at a leader handover may both reconcile a
// workload whose change was adopted: one migration is made, owned by the
// workload, and neither fails.
var _ = Describe("Adopted migrations made by two replicas at once", func() {
	It("makes one migration and answers both without an error", func() {
		namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "adopted-race-"}}
		Expect(k8sClient.Create(ctx, namespace)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, namespace))).To(Succeed()) })
		term := corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}
		manifest := &corev1.PodSpec{
			Containers: []corev1.Container{{Name: "db", Image: "registry.invalid/db:1"}},
			Affinity:   &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}},
		}
		softened := adoption.Soften("Deployment", "db", nil, manifest)
		value, err := adoption.Encode(softened.Records)
		Expect(err).NotTo(HaveOccurred())
		labels := map[string]string{"app": "db"}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace.Name, Name: "db", Annotations: map[string]string{adoption.Annotation: value}},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: *softened.Spec}},
		}
		Expect(k8sClient.Create(ctx, d)).To(Succeed())

		req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(d)}
		recorders := []*events.FakeRecorder{events.NewFakeRecorder(10), events.NewFakeRecorder(10)}
		// Both replicas find no migration before either makes one.
		var looked sync.WaitGroup
		looked.Add(len(recorders))
		base, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		var gets atomic.Int32
		racing := interceptor.NewClient(base, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			err := c.Get(ctx, key, obj, opts...)
			if _, ok := obj.(*pgv1.PlacementMigration); ok && gets.Add(1) <= int32(len(recorders)) {
				looked.Done()
				looked.Wait()
			}
			return err
		}})
		errs := make(chan error, 2)
		for _, rec := range recorders {
			go func() {
				defer GinkgoRecover()
				_, err := (&adopt.Reconciler{Client: racing, APIReader: racing, Recorder: rec}).Reconcile(ctx, req)
				errs <- err
			}()
		}
		Expect(<-errs).To(Succeed())
		Expect(<-errs).To(Succeed())

		var list pgv1.PlacementMigrationList
		Expect(k8sClient.List(ctx, &list, client.InNamespace(namespace.Name))).To(Succeed())
		Expect(list.Items).To(HaveLen(1))
		Expect(list.Items[0].Name).To(Equal(softened.Records[0].Migration))
		Expect(metav1.GetControllerOf(&list.Items[0]).UID).To(Equal(d.UID))
		adopted := 0
		for _, rec := range recorders {
			close(rec.Events)
			for e := range rec.Events {
				Expect(e).NotTo(ContainSubstring(adopt.ReasonAdoptionFails))
				if strings.Contains(e, adopt.ReasonAdopted) {
					adopted++
				}
			}
		}
		Expect(adopted).To(BeNumerically(">=", 1), "the replica that made the migration says so")
	})
})
