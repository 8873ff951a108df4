package controller

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/placement-guard/placement-guard/internal/placement"
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
