package placement

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The existing pods' anti-affinity counts kept between questions stay
// exact across pod events: a pod without required anti-affinity leaves
// them as they are, one with it drops them. After each event the snapshot
// answers as one built fresh from the same pods.
func TestKeptAntiAffinityCountsFollowPodEvents(t *testing.T) {
	web := map[string]string{"app": "web"}
	nodes := []*corev1.Node{mkNode("a", zone("z1")), mkNode("b", zone("z1")), mkNode("c", zone("z2")), mkNode("d", zone("z2"))}
	guard := mkPod("ns", "guard", on("a"), withLabels("app", "guard"), antiAffinity(term(corev1.LabelHostname, web)))
	filler := mkPod("ns", "filler", on("b"), withLabels("app", "filler"), requests("100m", "64Mi"))
	s, err := NewSnapshot(Objects{Nodes: nodes, Pods: []*corev1.Pod{guard, filler}})
	if err != nil {
		t.Fatal(err)
	}
	incoming := mkPod("ns", "web-new", withLabels("app", "web"))
	pods := map[string]*corev1.Pod{"guard": guard, "filler": filler}
	for _, ev := range []struct {
		name string
		pod  *corev1.Pod
	}{
		{"an unrelated pod moves", mkPod("ns", "filler", on("c"), withLabels("app", "filler"), requests("100m", "64Mi"))},
		{"an unrelated pod relabelled", mkPod("ns", "filler", on("c"), withLabels("app", "other"), requests("100m", "64Mi"))},
		{"the guard moves", mkPod("ns", "guard", on("d"), withLabels("app", "guard"), antiAffinity(term(corev1.LabelHostname, web)))},
		{"the guard widens to the zone", mkPod("ns", "guard", on("d"), withLabels("app", "guard"), antiAffinity(term(corev1.LabelTopologyZone, web)))},
	} {
		if _, err := s.Schedule(incoming); err != nil { // fills the kept counts
			t.Fatal(err)
		}
		ev.pod.UID = pods[ev.pod.Name].UID
		pods[ev.pod.Name] = ev.pod
		if err := s.UpsertPod(ev.pod); err != nil {
			t.Fatal(err)
		}
		got, err := s.Schedule(incoming)
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := NewSnapshot(Objects{Nodes: nodes, Pods: []*corev1.Pod{pods["guard"], pods["filler"]}})
		if err != nil {
			t.Fatal(err)
		}
		want, err := fresh.Schedule(incoming)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Nodes, want.Nodes) {
			t.Errorf("%s: the incoming pod may go to %v, a fresh snapshot says %v", ev.name, got.Nodes, want.Nodes)
		}
	}
}
