package faults

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/test/utils"
)

// findingNotes are the notes of the Events that record a finding of type
// reason on the Deployment name.
func findingNotes(ctx context.Context, namespace, name, reason string) []string {
	var list corev1.EventList
	Expect(k8sClient.List(ctx, &list, client.InNamespace(namespace))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Deployment" && e.InvolvedObject.Name == name && e.Reason == reason {
			out = append(out, e.Message)
		}
	}
	return out
}

var _ = Describe("F19: the leader that records the admission check's findings killed, another taking over", Label("faults", "F19"), func() {
	It("records each finding once per change of the workload: the new leader says nothing the old one said, and says the next change's", func(ctx SpecContext) {
		a, _ := elected("f19-a")
		b, _ := elected("f19-b")
		a.start()
		env := newEnv(ctx, "f19")
		_, err := env.AddNode(ctx, "data-1", map[string]string{"role": "data"})
		Expect(err).NotTo(HaveOccurred())

		By("seed 000 written straight into the graph DB: one data node for two that must be apart")
		search := utils.Deployment(env.Namespace, "search", env.Pool(), 1, nil)
		search.Spec.Template.Spec.NodeSelector["role"] = "data"
		Expect(k8sClient.Create(ctx, search)).To(Succeed())
		Expect(env.WaitRunning(ctx, map[string]string{"app": "search"}, 1)).To(Succeed())
		graph := utils.Deployment(env.Namespace, "graphdb", env.Pool(), 1, nil)
		graph.Spec.Template.Spec.NodeSelector["role"] = "data"
		graph.Spec.Template.Spec.Affinity = utils.HostnameAntiAffinity(map[string]string{"app": "search"})
		Expect(k8sClient.Create(ctx, graph)).To(Succeed())
		Eventually(func() []string { return findingNotes(ctx, env.Namespace, "graphdb", "InsufficientCapacity") }).Should(
			ConsistOf(And(ContainSubstring("qualifying nodes"), HaveSuffix("(generation 1)"))), func() string { return a.log(20000) + allEvents(ctx, env.Namespace) })

		By("b starts; a, the leader, is killed; b takes the lease and judges every workload afresh")
		b.start()
		holder := leaseHolder(ctx)
		a.kill()
		Eventually(leaseHolder, time.Minute, 100*time.Millisecond).WithContext(ctx).ShouldNot(Equal(holder), "b takes the lease")
		Eventually(func() string { return b.log(1 << 20) }).Should(ContainSubstring(`"msg":"Starting workers","controller":"admissionfindings"`))
		Consistently(func() []string { return findingNotes(ctx, env.Namespace, "graphdb", "InsufficientCapacity") }, "5s").Should(
			ConsistOf(HaveSuffix("(generation 1)")), "b, judging the workload afresh, says nothing a said")

		By("a change after the takeover is said by b, once, with its generation: b judges")
		Eventually(func() error {
			d := &appsv1.Deployment{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: "graphdb"}, d); err != nil {
				return err
			}
			d.Spec.Replicas = ptrInt32(2)
			return k8sClient.Update(ctx, d)
		}).Should(Succeed())
		Eventually(func() []string { return findingNotes(ctx, env.Namespace, "graphdb", "InsufficientCapacity") }).Should(
			ContainElement(HaveSuffix("(generation 2)")), b.log(3000))
		Consistently(func() []string { return findingNotes(ctx, env.Namespace, "graphdb", "InsufficientCapacity") }, "5s").Should(
			ConsistOf(HaveSuffix("(generation 1)"), HaveSuffix("(generation 2)")), "each finding once per change, across the failover")
		notes := findingNotes(ctx, env.Namespace, "graphdb", "InsufficientCapacity")
		AddReportEntry("F19", fmt.Sprintf("%d Events of the finding over two changes and a failover: %s", len(notes), strings.Join(notes, " | ")))
	}, NodeTimeout(4*time.Minute))
})

func ptrInt32(v int32) *int32 { return &v }

// allEvents lists a namespace's Events, for a failed spec.
func allEvents(ctx context.Context, namespace string) string {
	var list corev1.EventList
	if err := k8sClient.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range list.Items {
		fmt.Fprintf(&b, "\n%s %s/%s %s: %s", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Action, e.Message)
	}
	return b.String()
}
