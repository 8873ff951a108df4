package clusterstate

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/placement-guard/placement-guard/internal/metrics"
	"github.com/placement-guard/placement-guard/internal/pacing"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/podwire"
)

// The feed's store is what the reflector writes to: a relist that lacks a
// pod deletes it (its deletion was missed while the watch was down), each
// change is told with the labels before and after, and the feed reports
// itself synced only once the first list is in.
func TestThePodFeedKeepsTheEngineInStep(t *testing.T) {
	state := NewClusterState()
	feed := newPodFeed(nil, state, nil)
	store := feed.store.(*podStore)
	var told []string
	state.NotifyPods(func(ns string, before, after map[string]string) {
		told = append(told, fmt.Sprintf("%s %s->%s", ns, before["v"], after["v"]))
	})
	pod := func(name, v string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"v": v},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs", Controller: new(true)}}}}
	}
	names := func() []string {
		var out []string
		for _, p := range state.PodsControlledBy("ns", "rs") {
			out = append(out, p.Name)
		}
		return out
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if feed.HasSynced() || feed.WaitForSync(ctx) == nil {
		t.Fatal("the feed is synced before its first list")
	}
	if err := store.Replace([]any{pod("a", "1"), pod("b", "1")}, "1"); err != nil {
		t.Fatal(err)
	}
	if !feed.HasSynced() || feed.WaitForSync(ctx) != nil {
		t.Fatal("the feed is not synced after its first list")
	}
	counted := func() [3]float64 {
		return [3]float64{metrics.PodFeedEvents("added"), metrics.PodFeedEvents("modified"), metrics.PodFeedEvents("deleted")}
	}
	before := counted()
	_ = store.Update(pod("a", "2"))
	_ = store.Add(pod("c", "1"))
	if got := names(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("pods = %v", got)
	}
	_ = store.Delete(pod("c", "1"))
	if got := counted(); got != [3]float64{before[0] + 1, before[1] + 1, before[2] + 1} {
		t.Fatalf("pod events counted (added, modified, deleted) went from %v to %v, want one more of each", before, got)
	}
	// The watch broke; b went meanwhile, d came.
	if err := store.Replace([]any{pod("a", "2"), pod("d", "1")}, "2"); err != nil {
		t.Fatal(err)
	}
	if got := names(); !slices.Equal(got, []string{"a", "d"}) {
		t.Fatalf("after the relist pods = %v, want b dropped and d added", got)
	}
	want := []string{"ns ->1", "ns ->1", "ns 1->2", "ns ->1", "ns ->1", "ns 2->2", "ns ->1", "ns ->1"}
	if !slices.Equal(told, want) {
		t.Fatalf("told %v, want %v", told, want)
	}
}

// A streamed list is held by the reflector until it ends, in a store of
// its own that applies the feed's transformer. The feed takes each pod in
// as it streams and the reflector holds its uid alone:
// a pod deleted while the list streams is dropped when it ends.
func TestAStreamedListIsTakenInAsItComes(t *testing.T) {
	state := NewClusterState()
	store := newPodFeed(nil, state, nil).store.(*podStore)
	held := toolscache.NewStore(toolscache.DeletionHandlingMetaNamespaceKeyFunc, toolscache.WithTransformer(store.Transformer()))
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"app": "a"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs", Controller: new(true)}}},
			Spec: corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Name: "c", Image: "x", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}}}}
	}
	names := func() []string {
		var out []string
		for _, p := range state.PodsControlledBy("ns", "rs") {
			out = append(out, p.Name)
		}
		return out
	}
	for _, name := range []string{"a", "b", "c"} {
		if err := held.Add(pod(name)); err != nil {
			t.Fatal(err)
		}
	}
	if got := names(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("while the list streams the engine holds %v, want every pod streamed so far", got)
	}
	for _, obj := range held.List() {
		if _, ok := obj.(streamedPod); !ok {
			t.Fatalf("the reflector holds %T, want the pod's uid alone", obj)
		}
	}
	// b is deleted while the list streams.
	if err := held.Delete(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"}}); err != nil {
		t.Fatal(err)
	}
	if err := store.Replace(held.List(), "1"); err != nil {
		t.Fatal(err)
	}
	if got := names(); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("after the list pods = %v, want b dropped", got)
	}
	if !store.feed.HasSynced() {
		t.Fatal("the feed is not synced after a streamed first list")
	}
}

// BenchmarkFirstList takes in a streamed first list of 30,000 realistic
// pods as the feed does: decoded by podwire, held by the reflector through
// the store's transformer until the list ends, then replaced into the
// engine. heldB/pod is the live heap at the end of the stream, when the
// manager's memory peaks. "held-trimmed" is how the feed took a list in
// before: every pod held trimmed, and indexed when the list ended.
func BenchmarkFirstList(b *testing.B) {
	const n = 30000
	raws := make([][]byte, n)
	for i := range raws {
		raw, err := benchPod(i).Marshal()
		if err != nil {
			b.Fatal(err)
		}
		raws[i] = raw
	}
	run := func(b *testing.B, transform func(*podStore) toolscache.TransformFunc) {
		b.ReportAllocs()
		var before, atEnd runtime.MemStats
		for b.Loop() {
			runtime.GC()
			runtime.ReadMemStats(&before)
			store := newPodFeed(nil, NewClusterState(), nil).store.(*podStore)
			held := toolscache.NewStore(toolscache.DeletionHandlingMetaNamespaceKeyFunc, toolscache.WithTransformer(transform(store)))
			for _, raw := range raws {
				p := &corev1.Pod{}
				if err := podwire.DecodePod(raw, p); err != nil {
					b.Fatal(err)
				}
				if err := held.Add(p); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			runtime.GC()
			runtime.ReadMemStats(&atEnd)
			b.StartTimer()
			if err := store.Replace(held.List(), ""); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/pod")
		b.ReportMetric(float64(int64(atEnd.HeapAlloc)-int64(before.HeapAlloc))/n, "heldB/pod")
	}
	b.Run("as-fed", func(b *testing.B) { run(b, (*podStore).Transformer) })
	b.Run("held-trimmed", func(b *testing.B) {
		run(b, func(*podStore) toolscache.TransformFunc {
			return func(o any) (any, error) { return placement.TrimPod(o.(*corev1.Pod)), nil }
		})
	})
}

// benchPod is a pod as a Deployment of 100 makes it on 1,000 nodes, with
// what the operator never reads.
func benchPod(i int) *corev1.Pod {
	c := corev1.Container{
		Name: "app", Image: "registry.example.com/team/service:v1.2.3", Command: []string{"/bin/service"},
		Ports:          []corev1.ContainerPort{{ContainerPort: 8080}},
		Resources:      corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready"}}},
	}
	for k := range 10 {
		c.Env = append(c.Env, corev1.EnvVar{Name: fmt.Sprintf("SETTING_%d", k), Value: "some-value"})
	}
	app := fmt.Sprintf("app-%d", i%100)
	now := metav1.Now()
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", i%10), Name: fmt.Sprintf("%s-%d", app, i), UID: types.UID(fmt.Sprintf("uid-%d", i)),
			ResourceVersion: fmt.Sprint(1000 + i), Labels: map[string]string{"app": app, "pod-template-hash": "abc", "app.kubernetes.io/part-of": "shop", "app.kubernetes.io/version": "1.4.2", "team": fmt.Sprintf("team-%d", i%10)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app + "-abc", UID: types.UID("rs-" + app), Controller: new(true)}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{}}}`)}}},
		Spec: corev1.PodSpec{NodeName: fmt.Sprintf("n%d", i%1000), Containers: []corev1.Container{c, c},
			// The API server names each pod's token volume apart.
			Volumes: []corev1.Volume{{Name: fmt.Sprintf("kube-api-access-%05d", i), VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1",
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, Image: c.Image}}},
	}
}

// A list of every pod is never paced: the feed pauses its pacing when it
// starts a list or a streamed list, and resumes it once the list is in.
// A watch resumed after a list, without initial events, keeps the pace.
func TestListsAreNeverPaced(t *testing.T) {
	pacer := pacing.NewPacer(time.Second)
	feed := newPodFeed(&toolscache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (k8sruntime.Object, error) {
			return &corev1.PodList{}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			return watch.NewFake(), nil
		},
	}, NewClusterState(), pacer)
	lw := feed.lw.(toolscache.ListerWatcherWithContext)
	store := feed.store.(*podStore)
	ctx := context.Background()

	if _, err := lw.WatchWithContext(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true)}); err != nil {
		t.Fatal(err)
	}
	if !pacer.Paused() {
		t.Fatal("a streamed list started paced")
	}
	if err := store.Replace(nil, "1"); err != nil {
		t.Fatal(err)
	}
	if pacer.Paused() {
		t.Fatal("the watch after the list is not paced")
	}
	if _, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "1"}); err != nil {
		t.Fatal(err)
	}
	if pacer.Paused() {
		t.Fatal("a watch from a resource version paused the pacing")
	}
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if !pacer.Paused() {
		t.Fatal("a list started paced")
	}
}
