package controller

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/podwire"
)

// The feed's store is what the reflector writes to: a relist that lacks a
// pod deletes it (its deletion was missed while the watch was down), each
// change is told with the labels before and after, and the feed reports
// itself synced only once the first list is in.
func TestThePodFeedKeepsTheEngineInStep(t *testing.T) {
	state := NewClusterState()
	feed := newPodFeed(nil, state)
	store := &podStore{feed: feed}
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
	_ = store.Update(pod("a", "2"))
	_ = store.Add(pod("c", "1"))
	if got := names(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("pods = %v", got)
	}
	_ = store.Delete(pod("c", "1"))
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
	// A streamed first list is held whole until it ends: it is held trimmed.
	full := pod("e", "1")
	full.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"}
	full.Spec.Containers = []corev1.Container{{Name: "c", Image: "x", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}}
	if got, err := store.Transformer()(full); err != nil || got.(*corev1.Pod).Annotations != nil || got.(*corev1.Pod).Spec.Containers[0].Env != nil {
		t.Fatalf("the list's pods are not trimmed: %+v, %v", got, err)
	}
	var kept int
	_ = state.With(func(s *placement.Snapshot) error { kept = s.PodCount(); return nil })
	if kept != 2 {
		t.Fatalf("the engine holds %d pods, want 2", kept)
	}
}

// BenchmarkFirstList takes in a first list of 30,000 realistic pods as the
// feed does: decoded by podwire, held by the reflector through the store's
// transformer, then replaced into the engine. "trimmed-first" trims each
// pod before it is held, as the transformer did before it knew stripped
// pods.
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
		for b.Loop() {
			store := &podStore{feed: newPodFeed(nil, NewClusterState())}
			tf := transform(store)
			held := make([]any, 0, n)
			for _, raw := range raws {
				p := &corev1.Pod{}
				if err := podwire.DecodePod(raw, p); err != nil {
					b.Fatal(err)
				}
				obj, err := tf(p)
				if err != nil {
					b.Fatal(err)
				}
				held = append(held, obj)
			}
			if err := store.Replace(held, ""); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/pod")
	}
	b.Run("as-fed", func(b *testing.B) { run(b, (*podStore).Transformer) })
	b.Run("trimmed-first", func(b *testing.B) {
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
			ResourceVersion: fmt.Sprint(1000 + i), Labels: map[string]string{"app": app, "pod-template-hash": "abc"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app + "-abc", UID: types.UID("rs-" + app), Controller: new(true)}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{}}}`)}}},
		Spec: corev1.PodSpec{NodeName: fmt.Sprintf("n%d", i%1000), Containers: []corev1.Container{c, c}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1",
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, Image: c.Image}}},
	}
}
