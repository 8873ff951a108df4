package placement

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// A node's room for one more pod follows its pods as they are bound,
// deleted, moved, and as the node itself leaves and comes back: capacity
// counts a node at its pod limit as full, and one with a slot free as
// qualifying, after every change.
func TestANodesRoomForAPodFollowsItsPods(t *testing.T) {
	nodes := []*corev1.Node{mkNode("full", alloc("4", "8Gi", "2")), mkNode("spare", alloc("4", "8Gi", "2"))}
	held := []*corev1.Pod{mkPod("ns", "a", on("full")), mkPod("ns", "b", on("full")), mkPod("ns", "c", on("spare"))}
	objs := Objects{Nodes: nodes, Pods: held}
	s, err := NewSnapshot(objs)
	if err != nil {
		t.Fatal(err)
	}
	w := withSelector(deployment(objs, "web", 1, appsv1.DeploymentStrategy{}))
	qualifying := func() []string {
		t.Helper()
		c, err := s.CapacityFor([]*Workload{w}, Constraint{AntiAffinity: &AntiAffinity{TopologyKey: corev1.LabelHostname, Selector: selector("app", "web")}}, CapacitySpec{})
		if err != nil {
			t.Fatal(err)
		}
		return c.Nodes
	}
	expect := func(step string, want ...string) {
		t.Helper()
		got := qualifying()
		if len(got) != len(want) {
			t.Fatalf("%s: qualifying nodes %v, want %v", step, got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s: qualifying nodes %v, want %v", step, got, want)
			}
		}
	}
	expect("built", "spare")

	s.DeletePod(held[0].UID)
	expect("a pod of the full node deleted", "full", "spare")

	moved := held[1].DeepCopy()
	moved.Spec.NodeName = "spare"
	if err := s.UpsertPod(moved); err != nil {
		t.Fatal(err)
	}
	expect("its other pod moved to the spare node", "full")

	s.DeleteNode("spare")
	expect("the spare node gone, its pods unbound", "full")
	s.UpsertNode(nodes[1])
	expect("the spare node back with its two pods", "full")

	if err := s.UpsertPod(mkPod("ns", "d", on("full"))); err != nil {
		t.Fatal(err)
	}
	expect("a new pod on the emptied node", "full")
	if err := s.UpsertPod(mkPod("ns", "e", on("full"))); err != nil {
		t.Fatal(err)
	}
	expect("another new pod in its last free slot")
}
