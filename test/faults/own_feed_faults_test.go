package faults

import (
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/test/faultproxy"
	"github.com/placement-guard/placement-guard/test/utils"
)

var _ = Describe("F22: the operator's own PlacementMigration watch stalls while a migration waits for its node", Label("faults", "F22"), func() {
	It("writes the stage once the node joins, right after recording its intent, without waiting for the record's own event", func(ctx SpecContext) {
		env := newEnv(ctx, "f22")
		for _, n := range []string{"data-0", "data-1"} {
			_, err := env.AddNode(ctx, n, map[string]string{"role": dataRole})
			Expect(err).NotTo(HaveOccurred())
		}
		// Replaced one at a time (no surge): three hosts are enough.
		web := utils.Deployment(env.Namespace, "web", env.Pool(), 3, nil)
		web.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromInt32(1))}
		Expect(k8sClient.Create(ctx, web)).To(Succeed())
		Expect(env.WaitRunning(ctx, map[string]string{"app": "web"}, 3)).To(Succeed())

		// The operator's list and watch of PlacementMigrations (no name)
		// are refused while stalled; its reads and writes of one
		// migration by name pass.
		isMigrationFeed := func(r faultproxy.Request) bool {
			return r.Method == "GET" && r.Group == "placementguard.io" && r.Resource == "placementmigrations" && r.Name == ""
		}
		var mu sync.Mutex
		stalled := false
		mgr, proxy := operator("f22", func(r faultproxy.Request) faultproxy.Action {
			mu.Lock()
			defer mu.Unlock()
			if isMigrationFeed(r) && stalled {
				return faultproxy.Action{Kind: faultproxy.Fail, Code: 503}
			}
			return faultproxy.Action{}
		})
		DeferCleanup(func() {
			if CurrentSpecReport().Failed() {
				AddReportEntry("the manager's log", mgr.log(20000))
			}
		})

		pm := webOneAHost(env.Namespace)
		pm.Spec.SoakDuration = &metav1.Duration{}
		Expect(k8sClient.Create(ctx, pm)).To(Succeed())
		Eventually(phaseOf(ctx, pm), time.Minute).Should(Equal(pgv1.PhaseWaitingForCapacity))
		// Waiting, it writes nothing more, and its cache has its last
		// status by the end of this.
		waiting := pm.ResourceVersion
		Consistently(func() string {
			_ = k8sClient.Get(ctx, client.ObjectKeyFromObject(pm), pm)
			return pm.ResourceVersion
		}, 2*time.Second).Should(Equal(waiting), "a migration waiting for its node writes nothing")

		By("stalling the operator's PlacementMigration feed, then adding the third data node")
		mu.Lock()
		stalled = true
		mu.Unlock()
		proxy.CutWatches(func(r faultproxy.Request) bool { return isMigrationFeed(r) && r.Watch })
		_, err := env.AddNode(ctx, "data-2", map[string]string{"role": dataRole})
		Expect(err).NotTo(HaveOccurred())

		By("the soft stage is recorded and written, though the operator's cache never sees the record")
		live := &appsv1.Deployment{}
		Eventually(func() *corev1.Affinity {
			_ = k8sClient.Get(ctx, client.ObjectKeyFromObject(web), live)
			return live.Spec.Template.Spec.Affinity
		}, time.Minute).ShouldNot(BeNil(), func() string {
			_ = k8sClient.Get(ctx, client.ObjectKeyFromObject(pm), pm)
			return fmt.Sprintf("the stage written while the migration's feed is stalled; the migration: %s %+v", pm.Status.Phase, pm.Status.Conditions)
		})
		Expect(live.Spec.Template.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution).To(HaveLen(1), "the Soft stage first")
		Expect(deploymentWrites(proxy, env.Namespace)).To(Equal(1))
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pm), pm)).To(Succeed())
		Expect(pm.Status.Operation).NotTo(BeNil(), "the intent recorded before the write")
		Expect(pm.Status.Operation.Targets[0].AppliedGeneration).To(Equal(live.Generation), "and the write recorded in it")

		By("the feed is back: the migration goes on to its end")
		mu.Lock()
		stalled = false
		mu.Unlock()
		Eventually(phaseOf(ctx, pm), 2*time.Minute).Should(Equal(pgv1.PhaseSucceeded))
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(web), live)).To(Succeed())
		Expect(live.Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution).To(HaveLen(1))
	}, NodeTimeout(5*time.Minute))
})
