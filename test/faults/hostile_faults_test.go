package faults

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/placement-guard/placement-guard/test/utils"
)

// rss is the resident memory of the manager's process, in bytes, as the
// kernel counts it (what a container's memory limit kills on).
func (m *manager) rss() int64 {
	m.mu.Lock()
	pid := m.cmd.Process.Pid
	m.mu.Unlock()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	Expect(err).NotTo(HaveOccurred())
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			Expect(err).NotTo(HaveOccurred())
			return kb << 10
		}
	}
	Fail("no VmRSS in /proc/" + strconv.Itoa(pid) + "/status")
	return 0
}

var _ = Describe("F20: a tenant's Deployment of twenty million replicas, its pods held back by a quota, the leader killed and another starting", Label("faults", "F20"), func() {
	It("answers it from its bound at every leader's start, with the manager's memory flat, and says it once", func(ctx SpecContext) {
		a, _ := elected("f20-a")
		b, _ := elected("f20-b")
		a.start()
		env := newEnv(ctx, "f20")
		for _, n := range []string{"n1", "n2"} {
			_, err := env.AddNode(ctx, n, nil)
			Expect(err).NotTo(HaveOccurred())
		}
		Eventually(func() string { return a.log(1 << 20) }).Should(ContainSubstring(`"msg":"Starting workers","controller":"admissionfindings"`))
		baseline := a.rss()

		By("a pod quota of two, and a Deployment of twenty million replicas spread over the hosts")
		Expect(k8sClient.Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: "pods"},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2")}}})).To(Succeed())
		bulk := utils.Deployment(env.Namespace, "bulk", env.Pool(), 20_000_000, nil)
		bulk.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1000, TopologyKey: corev1.LabelHostname,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "bulk"}}}}
		Expect(k8sClient.Create(ctx, bulk)).To(Succeed())
		said := func() []string { return findingNotes(ctx, env.Namespace, "bulk", "Unschedulable") }
		Eventually(said).Should(ConsistOf(And(ContainSubstring("20000000 replicas exceed the"), HaveSuffix("(generation 1)"))), func() string { return a.log(4000) })
		grown := a.rss() - baseline

		By("b starts; a, the leader, is killed; b takes the lease and meets the Deployment at its start")
		b.start()
		holder := leaseHolder(ctx)
		a.kill()
		Eventually(leaseHolder, time.Minute, 100*time.Millisecond).WithContext(ctx).ShouldNot(Equal(holder), "b takes the lease")
		Eventually(func() string { return b.log(1 << 20) }).Should(ContainSubstring(`"msg":"Starting workers","controller":"admissionfindings"`))
		bBaseline := b.rss()
		Consistently(said, "10s").Should(HaveLen(1), "b judges no generation a judged, and says nothing again")
		bGrown := b.rss() - bBaseline
		Expect(grown).To(BeNumerically("<", 64<<20), "the leader's memory grew %d MiB judging it", grown>>20)
		Expect(bGrown).To(BeNumerically("<", 64<<20), "the next leader's memory grew %d MiB at its start", bGrown>>20)
		AddReportEntry("F20", fmt.Sprintf("the leader's RSS %d MiB, %+d MiB once it judged twenty million replicas; the next leader's %d MiB, %+d MiB over its start",
			baseline>>20, grown>>20, bBaseline>>20, bGrown>>20))
		Expect(k8sClient.Delete(ctx, bulk)).To(Succeed())
	}, NodeTimeout(4*time.Minute))
})
