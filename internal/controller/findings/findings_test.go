package findings

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/placement"
)

var _ = Describe("Recording the admission check's findings", func() {
	var ns string

	BeforeEach(func() {
		ns = fmt.Sprintf("findings-%d", GinkgoRandomSeed()+int64(GinkgoParallelProcess())*1000+int64(CurrentSpecReport().LeafNodeLocation.LineNumber))
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Eventually(func() int {
			n := 0
			_ = cluster.With(ctx, func(s *placement.Snapshot) error { n = s.NodeCount(); return nil })
			return n
		}).Should(Equal(2))
	})

	// leader is a findings controller as a newly elected leader has it:
	// nothing judged yet.
	leader := func(budget time.Duration) *Reconciler {
		return &Reconciler{Client: mgr.GetClient(), Events: k8sClient, Recorder: mgr.GetEventRecorder("placement-guard"), Cluster: cluster, Budget: budget}
	}

	// apart is a Deployment of n replicas kept apart per node: more than
	// two cannot be placed on the two nodes.
	apart := func(name string, n int32) *appsv1.Deployment {
		labels := map[string]string{"app": name}
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(n), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Image: "x"}},
				Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}}}},
			}},
		}}
	}

	// create creates d and waits until the manager's cache has it, as the
	// leader's reconcile reads it there.
	create := func(d *appsv1.Deployment) {
		Expect(k8sClient.Create(ctx, d)).To(Succeed())
		Eventually(func() error { return mgr.GetClient().Get(ctx, client.ObjectKeyFromObject(d), &appsv1.Deployment{}) }).Should(Succeed())
	}

	// scale sets d's replicas and waits until the cache has the new
	// generation.
	scale := func(d *appsv1.Deployment, n int32) {
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
		d.Spec.Replicas = ptr.To(n)
		Expect(k8sClient.Update(ctx, d)).To(Succeed())
		Eventually(func() int64 {
			got := &appsv1.Deployment{}
			_ = mgr.GetClient().Get(ctx, client.ObjectKeyFromObject(d), got)
			return got.Generation
		}).Should(Equal(d.Generation))
	}

	reconcile := func(r *Reconciler, d *appsv1.Deployment) {
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(d)})
		Expect(err).NotTo(HaveOccurred())
	}

	// said are the notes of the judgements recorded of d, by reason.
	said := func(d *appsv1.Deployment) func() []string {
		return func() []string {
			var list corev1.EventList
			Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			var out []string
			for _, e := range list.Items {
				if e.InvolvedObject.Name == d.Name && e.Action == findingAction {
					out = append(out, e.Reason+": "+e.Message)
				}
			}
			return out
		}
	}
	of := func(reason string, generation int64) types.GomegaMatcher {
		return ContainElement(And(HavePrefix(reason+": "), HaveSuffix(fmt.Sprintf("(generation %d)", generation))))
	}

	It("records each finding once per generation, and the next generation's", func() {
		d := apart("rates", 3)
		create(d)
		r := leader(0)
		reconcile(r, d)
		reconcile(r, d)
		scale(d, 4)
		reconcile(r, d)
		Eventually(said(d)).Should(of(placement.HazardInsufficientCapacity, 2))
		Expect(said(d)()).To(ConsistOf(ContainSubstring("have 2 of 3 qualifying nodes"), ContainSubstring("have 2 of 4 qualifying nodes")),
			"generation 1 said once, generation 2 once")
	})

	It("answers a workload of twenty million replicas from its bound, not pod by pod", func() {
		d := apart("bulk", 20_000_000)
		d.Spec.Template.Spec.Affinity = nil
		d.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1000, TopologyKey: corev1.LabelHostname,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "bulk"}}}}
		create(d)
		reconcile(leader(0), d)
		Eventually(said(d)).Should(ContainElement(And(HavePrefix(placement.HazardUnschedulable+": "), ContainSubstring("exceed the 220 pods"))))
	})

	It("says a judgement that ran out of its budget once, and a new leader judges no generation a leader before it judged", func() {
		d := apart("slow", 3)
		create(d)
		// A budget no judgement fits in.
		first := leader(time.Nanosecond)
		reconcile(first, d)
		reconcile(first, d)
		Eventually(said(d)).Should(of(ReasonNotJudged, 1))

		// The next leader, whose budget fits, meets generation 1 judged
		// already (said NotJudged): it asks nothing of it. It judges
		// generation 2.
		next := leader(0)
		reconcile(next, d)
		scale(d, 4)
		reconcile(next, d)
		Eventually(said(d)).Should(of(placement.HazardInsufficientCapacity, 2))
		notes := said(d)()
		Expect(notes).To(HaveLen(2), "one NotJudged of generation 1, one finding of generation 2: %v", notes)
		Expect(strings.Join(notes, "\n")).NotTo(ContainSubstring(placement.HazardInsufficientCapacity + ": Deployment/slow: required anti-affinity on kubernetes.io/hostname InsufficientCapacity: have 2 of 3 (generation 1)"))
	})

	It("forgets a workload that goes", func() {
		d := apart("gone", 3)
		create(d)
		r := leader(0)
		reconcile(r, d)
		Expect(r.remembered()).To(Equal(1))
		Expect(k8sClient.Delete(ctx, d)).To(Succeed())
		Eventually(func() error { return mgr.GetClient().Get(ctx, client.ObjectKeyFromObject(d), &appsv1.Deployment{}) }).ShouldNot(Succeed())
		reconcile(r, d)
		Expect(r.remembered()).To(BeZero())
	})
})
