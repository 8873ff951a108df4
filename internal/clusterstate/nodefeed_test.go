package clusterstate

import (
	"context"
	"slices"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/pacing"
	"github.com/placement-guard/placement-guard/internal/placement"
)

func kwokNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelTopologyZone: "a"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kwok"}}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Unix(1, 0)}},
			Images:      []corev1.ContainerImage{{Names: []string{"registry.example.com/big:v1"}}},
		},
	}
}

// The node feed's store takes every node into the engine, trimmed, and
// tells of a node only when what the engine reads changed: a heartbeat
// is taken in and told to nobody. A relist drops the nodes it lacks.
func TestTheNodeFeedTellsOnlyChangesThatReachAnAnswer(t *testing.T) {
	state := NewClusterState()
	pacer := pacing.NewPacer(time.Hour)
	feed := newNodeFeed(nil, state, pacer)
	store := feed.store
	var told []string
	state.Notify(func(o client.Object) { told = append(told, o.GetName()) })
	held := func(name string) *corev1.Node {
		t.Helper()
		var n *corev1.Node
		_ = state.With(context.Background(), func(s *placement.Snapshot) error { n, _ = s.Node(name); return nil })
		return n
	}

	pacer.Pause()
	if err := store.Replace([]any{kwokNode("a"), kwokNode("b")}, "1"); err != nil {
		t.Fatal(err)
	}
	if !feed.HasSynced() || feed.WaitForSync(context.Background()) != nil || pacer.Paused() {
		t.Fatal("after its first list the feed must be synced and paced again")
	}
	if n := held("a"); n == nil || n.ManagedFields != nil || len(n.Status.Images) != 1 {
		t.Fatalf("node a is held as %+v, want it trimmed, its images kept", n)
	}
	// The two nodes' image names are one string.
	if a, b := held("a").Status.Images[0].Names[0], held("b").Status.Images[0].Names[0]; unsafe.StringData(a) != unsafe.StringData(b) {
		t.Error("the nodes' image names are kept twice")
	}
	if !slices.Equal(told, []string{"a", "b"}) || state.NodeChanges() != 2 {
		t.Fatalf("the first list told %v and counted %d changes, want a and b", told, state.NodeChanges())
	}

	told = nil
	heartbeat := kwokNode("a")
	heartbeat.Annotations = map[string]string{"node.alpha.kubernetes.io/ttl": "60"}
	heartbeat.Status.Conditions[0].LastHeartbeatTime = metav1.Unix(40, 0)
	heartbeat.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4000m")}
	if err := store.Update(heartbeat); err != nil {
		t.Fatal(err)
	}
	if len(told) != 0 || state.NodeChanges() != 2 {
		t.Fatalf("a heartbeat was told (%v, %d changes counted)", told, state.NodeChanges())
	}
	if held("a") != heartbeat {
		t.Fatal("the engine does not hold the node's last version")
	}

	changes := map[string]func(*corev1.Node){
		"images": func(n *corev1.Node) {
			n.Status.Images = append(n.Status.Images, corev1.ContainerImage{Names: []string{"registry.example.com/web:2"}, SizeBytes: 1 << 28})
		},
		"labels": func(n *corev1.Node) { n.Labels[corev1.LabelTopologyZone] = "b" },
		"taints": func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}
		},
		"cordon":      func(n *corev1.Node) { n.Spec.Unschedulable = true },
		"allocatable": func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("5") },
		"readiness":   func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionUnknown },
	}
	for what, change := range changes {
		told = nil
		if err := store.Update(kwokNode("a")); err != nil {
			t.Fatal(err)
		}
		told = nil
		n := kwokNode("a")
		change(n)
		if err := store.Update(n); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(told, []string{"a"}) {
			t.Errorf("a change of the node's %s told %v, want a", what, told)
		}
	}

	told = nil
	if err := store.Replace([]any{kwokNode("b")}, "2"); err != nil {
		t.Fatal(err)
	}
	if held("a") != nil || !slices.Contains(told, "a") {
		t.Fatalf("a relist without node a kept it (told %v)", told)
	}
	told = nil
	if err := store.Delete(kwokNode("b")); err != nil {
		t.Fatal(err)
	}
	if held("b") != nil || !slices.Equal(told, []string{"b"}) {
		t.Fatalf("a deleted node was kept or not told (told %v)", told)
	}
}
