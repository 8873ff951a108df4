package clusterstate

import (
	"context"
	"fmt"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/placement"
)

var _ = Describe("The cluster state behind the placement engine", func() {
	var (
		state *ClusterState
		ca    cache.Cache
		feed  *Feed
	)

	BeforeEach(func() {
		opts := CacheOptions()
		opts.Scheme = scheme
		var err error
		ca, err = cache.New(cfg, opts)
		Expect(err).NotTo(HaveOccurred())
		state = NewClusterState()
		Expect(state.Watch(ctx, ca)).To(Succeed())
		cacheCtx, stop := context.WithCancel(ctx)
		DeferCleanup(stop)
		go func() { _ = ca.Start(cacheCtx) }()
		Expect(ca.WaitForCacheSync(cacheCtx)).To(BeTrue())
		feed, err = NewPodFeed(cfg, state, DefaultFeedReadInterval)
		Expect(err).NotTo(HaveOccurred())
		nodes, err := NewNodeFeed(cfg, state, DefaultFeedReadInterval)
		Expect(err).NotTo(HaveOccurred())
		go func() { _ = feed.Start(cacheCtx) }()
		go func() { _ = nodes.Start(cacheCtx) }()
		Expect(NewFeeds(feed, nodes).WaitForSync(cacheCtx)).To(Succeed())
	})

	schedule := func(pod *corev1.Pod) placement.Verdict {
		var v placement.Verdict
		Expect(state.With(context.Background(), func(s *placement.Snapshot) error {
			var err error
			v, err = s.Schedule(pod)
			return err
		})).To(Succeed())
		return v
	}

	It("follows nodes and pods as they come, change and go", func() {
		suffix := fmt.Sprintf("%d", GinkgoRandomSeed()%100000)
		node := func(name string) *corev1.Node {
			return &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: name + "-" + suffix, Labels: map[string]string{corev1.LabelHostname: name + "-" + suffix, "suite": suffix}},
				Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("10"),
				}},
			}
		}
		a, b := node("a"), node("b")
		for _, n := range []*corev1.Node{a, b} {
			Expect(k8sClient.Create(ctx, n)).To(Succeed())
			// Status is a subresource: set the allocatable the scheduler reads.
			n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("10")}
			Expect(k8sClient.Status().Update(ctx, n)).To(Succeed())
			DeferCleanup(func() { _ = k8sClient.Delete(context.Background(), n) })
		}
		web := map[string]string{"app": "web-" + suffix}
		incoming := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "incoming", Labels: web},
			Spec: corev1.PodSpec{
				NodeSelector: map[string]string{"suite": suffix},
				// envtest runs no node lifecycle controller to lift the
				// not-ready taint the API server puts on new nodes.
				Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists}},
				Containers:  []corev1.Container{{Name: "c", Image: "x"}},
				Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: web},
				}}}},
			},
		}
		Eventually(func() []string { return schedule(incoming).Nodes }).Should(Equal([]string{a.Name, b.Name}))

		By("a pod bound to node a repels the incoming pod from it")
		bound := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-" + suffix, Labels: web},
			Spec:       corev1.PodSpec{NodeName: a.Name, Containers: []corev1.Container{{Name: "c", Image: "x"}}},
		}
		Expect(k8sClient.Create(ctx, bound)).To(Succeed())
		Eventually(func() []string { return schedule(incoming).Nodes }).Should(Equal([]string{b.Name}))

		By("cordoning node b leaves nowhere, in the scheduler's words")
		Expect(k8sClient.Patch(ctx, b, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`)))).To(Succeed())
		Eventually(func() string { return schedule(incoming).Message }).Should(ContainSubstring("1 node(s) didn't match pod anti-affinity rules, 1 node(s) were unschedulable"))

		By("deleting the pod frees node a again")
		Expect(k8sClient.Delete(ctx, bound, client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(func() []string { return schedule(incoming).Nodes }).Should(Equal([]string{a.Name}))
	})

	It("keeps pods as the engine's records, trimmed to what the engine reads", func() {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "trimmed", Annotations: map[string]string{"note": "dropped"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/x:1", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}}},
		}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(context.Background(), p) })
		var cached *corev1.Pod
		Eventually(func() bool {
			var ok bool
			_ = state.With(context.Background(), func(s *placement.Snapshot) error { cached, ok = s.Pod(p.UID); return nil })
			return ok
		}).Should(BeTrue())
		Expect(cached.Name).To(Equal("trimmed"))
		Expect(cached.Annotations).To(BeNil())
		Expect(cached.ManagedFields).To(BeNil())
		Expect(cached.Spec.Containers[0].Image).To(BeEmpty())
		Expect(cached.Spec.Containers[0].Env).To(BeNil())
		Expect(cached.UID).To(Equal(p.UID))
	})
	It("lists and watches pods without decoding what the engine never reads", func() {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "stripped", Labels: map[string]string{"app": "stripped"},
				Annotations: map[string]string{"note": "dropped", corev1.PodDeletionCost: "7"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/x:1", Env: []corev1.EnvVar{{Name: "A", Value: "b"}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}}}},
		}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(context.Background(), p) })
		stripped := func(got *corev1.Pod, label string) {
			GinkgoHelper()
			Expect(got.Labels).To(HaveKeyWithValue("app", label))
			Expect(got.Annotations).To(Equal(map[string]string{corev1.PodDeletionCost: "7"}))
			Expect(got.ManagedFields).To(BeNil())
			Expect(got.Spec.Containers[0].Image).To(BeEmpty())
			Expect(got.Spec.Containers[0].Env).To(BeNil())
			Expect(got.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()).To(BeEquivalentTo(250))
		}

		By("the list")
		lw := toolscache.ToListerWatcherWithContext(feed.lw)
		listed, err := lw.ListWithContext(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		pods := listed.(*corev1.PodList)
		i := slices.IndexFunc(pods.Items, func(q corev1.Pod) bool { return q.UID == p.UID })
		Expect(i).NotTo(BeNumerically("<", 0))
		stripped(&pods.Items[i], "stripped")

		By("the watch")
		w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: pods.ResourceVersion})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(w.Stop)
		Expect(k8sClient.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"relabelled"}}}`)))).To(Succeed())
		var got *corev1.Pod
		Eventually(w.ResultChan()).Should(Receive(WithTransform(func(e watch.Event) bool {
			pod, ok := e.Object.(*corev1.Pod)
			if ok && pod.UID == p.UID && e.Type == watch.Modified {
				got = pod
			}
			return got != nil
		}, BeTrue())))
		stripped(got, "relabelled")
	})

	It("keeps nodes without the status nobody here reads, their images kept", func() {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("imaged-%d", GinkgoRandomSeed()%100000)}}
		Expect(k8sClient.Create(ctx, n)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(context.Background(), n) })
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
		n.Status.Images = []corev1.ContainerImage{{Names: []string{"registry.example.com/big:v1"}, SizeBytes: 1 << 30}}
		n.Status.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: "v1.37.2"}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		Expect(k8sClient.Status().Update(ctx, n)).To(Succeed())
		var kept *corev1.Node
		Eventually(func() int {
			_ = state.With(context.Background(), func(s *placement.Snapshot) error { kept, _ = s.Node(n.Name); return nil })
			if kept == nil {
				return -1
			}
			return len(kept.Status.Conditions)
		}).Should(Equal(1))
		Expect(kept.Status.Images).To(HaveLen(1))
		Expect(kept.Status.NodeInfo.KubeletVersion).To(BeEmpty())
		Expect(kept.ManagedFields).To(BeNil())
		Expect(kept.Status.Allocatable.Cpu().String()).To(Equal("4"))
	})
})
