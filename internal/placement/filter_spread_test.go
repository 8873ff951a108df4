package placement

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestKeptSpreadEligibilityFollowsWhatItReads: which nodes a hard spread
// counts is kept with the template's node filters. Asked on one snapshot
// in turn, spreads that differ only in their taints policy or in their
// affinity policy each find the nodes a fresh snapshot finds for them
// alone; so does a spread asked again after a node is tainted.
//
// The cluster: a web pod in each of zones a, b and d; zone c's only node
// is tainted and holds none, and zone d's node lacks a region but has a
// pool. Honouring the taint leaves zone c out of the global minimum, so
// a, b and d stay open; ignoring it counts c's zero, and every zone is
// full. A region spread leaves d out. A pod that must go to d's pool
// finds it open when only its pool's node counts, and full when every
// node does.
func TestKeptSpreadEligibilityFollowsWhatItReads(t *testing.T) {
	web := map[string]string{"app": "web"}
	objs := Objects{
		Nodes: []*corev1.Node{
			mkNode("a1", zone("a"), label("region", "r1")),
			mkNode("b1", zone("b"), label("region", "r1")),
			mkNode("c1", zone("c"), label("region", "r1"), taint("dedicated", "x", corev1.TaintEffectNoSchedule)),
			mkNode("d1", zone("d"), label("pool", "p")),
		},
		Pods: []*corev1.Pod{
			mkPod("ns", "web-a", on("a1"), withLabels("app", "web")),
			mkPod("ns", "web-b", on("b1"), withLabels("app", "web")),
			mkPod("ns", "web-d", on("d1"), withLabels("app", "web")),
		},
	}
	pods := map[string]*corev1.Pod{
		"taints honoured": mkPod("ns", "in", withLabels("app", "web"), spread(corev1.LabelTopologyZone, 1, web, taintsPolicy(corev1.NodeInclusionPolicyHonor))),
		"taints ignored":  mkPod("ns", "in", withLabels("app", "web"), spread(corev1.LabelTopologyZone, 1, web, taintsPolicy(corev1.NodeInclusionPolicyIgnore))),
		"affinity ignored, d required": mkPod("ns", "in", withLabels("app", "web"), nodeSelector("pool", "p"),
			spread(corev1.LabelTopologyZone, 1, web, taintsPolicy(corev1.NodeInclusionPolicyIgnore), affinityPolicy(corev1.NodeInclusionPolicyIgnore))),
		"affinity honoured, d required": mkPod("ns", "in", withLabels("app", "web"), nodeSelector("pool", "p"),
			spread(corev1.LabelTopologyZone, 1, web, taintsPolicy(corev1.NodeInclusionPolicyIgnore))),
	}
	order := []string{"taints honoured", "taints ignored", "taints honoured", "affinity ignored, d required", "affinity honoured, d required", "taints ignored"}
	s, err := NewSnapshot(objs)
	if err != nil {
		t.Fatal(err)
	}
	ask := func(objs Objects) {
		t.Helper()
		distinct := map[string]bool{}
		for _, name := range order {
			fresh, err := NewSnapshot(objs)
			if err != nil {
				t.Fatal(err)
			}
			got, want := feasibleNames(t, s, pods[name]), feasibleNames(t, fresh, pods[name])
			if got != want {
				t.Errorf("%s: the snapshot finds %s, a fresh one %s", name, got, want)
			}
			distinct[want] = true
		}
		if len(distinct) < 3 {
			t.Fatalf("the spreads find only %v: the cluster tells their eligibility apart too little", distinct)
		}
	}
	ask(objs)
	// Zone a's node tainted too: honouring taints now leaves zone a out.
	objs.Nodes[0] = mkNode("a1", zone("a"), label("region", "r1"), taint("dedicated", "x", corev1.TaintEffectPreferNoSchedule), taint("other", "y", corev1.TaintEffectNoSchedule))
	s.UpsertNode(objs.Nodes[0])
	ask(objs)
}

// TestKeptSpreadEligibilityFollowsTheOtherKeys: a node without every hard
// spread's key counts for none of them. Zone e's node has no region and
// no web pod: a zone spread alone counts its zero, and only e is open; a
// zone spread beside a region spread leaves it out, and a and b are open.
// Asked in that order on one snapshot, each finds what a fresh one does.
func TestKeptSpreadEligibilityFollowsTheOtherKeys(t *testing.T) {
	web := map[string]string{"app": "web"}
	objs := Objects{
		Nodes: []*corev1.Node{mkNode("a1", zone("a"), label("region", "r1")), mkNode("b1", zone("b"), label("region", "r1")), mkNode("e1", zone("e"))},
		Pods:  []*corev1.Pod{mkPod("ns", "web-a", on("a1"), withLabels("app", "web")), mkPod("ns", "web-b", on("b1"), withLabels("app", "web"))},
	}
	zoneAlone := mkPod("ns", "in", withLabels("app", "web"), spread(corev1.LabelTopologyZone, 1, web))
	withRegion := mkPod("ns", "in", withLabels("app", "web"), spread(corev1.LabelTopologyZone, 1, web), spread("region", 5, web))
	s, err := NewSnapshot(objs)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		pod  *corev1.Pod
		want string
	}{{zoneAlone, "[e1]"}, {withRegion, "[a1 b1]"}, {zoneAlone, "[e1]"}} {
		if got := feasibleNames(t, s, c.pod); got != c.want {
			t.Errorf("%d spreads: the snapshot finds %s, want %s", len(c.pod.Spec.TopologySpreadConstraints), got, c.want)
		}
	}
}

// feasibleNames are the nodes pod fits on in s, in order.
func feasibleNames(t *testing.T, s *Snapshot, pod *corev1.Pod) string {
	t.Helper()
	e, err := s.newEvaluator(pod)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range e.feasible() {
		names = append(names, e.nodeName(i))
	}
	return fmt.Sprint(names)
}

// TestKeptSetsStayBounded: a tenant's workloads may name any number of
// spread keys and request any number of shapes. Asked 40 of each on one
// snapshot, it keeps at most maxSpreadEligibilities eligibilities for the
// template and maxLoadMemos shapes' scores, and every answer is still a
// fresh snapshot's.
func TestKeptSetsStayBounded(t *testing.T) {
	objs := Objects{}
	for k := range 6 {
		objs.Nodes = append(objs.Nodes, mkNode(fmt.Sprintf("n%d", k), zone(fmt.Sprintf("z%d", k%3))))
	}
	for k := range 40 {
		for _, n := range objs.Nodes {
			n.Labels[fmt.Sprintf("key-%d", k)] = n.Labels[corev1.LabelTopologyZone]
		}
	}
	s, err := NewSnapshot(objs)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := NewSnapshot(objs)
	if err != nil {
		t.Fatal(err)
	}
	for k := range 40 {
		pod := mkPod("ns", "in", withLabels("app", "web"), requests(fmt.Sprintf("%dm", 100+k), "64Mi"),
			spread(fmt.Sprintf("key-%d", k), 1, map[string]string{"app": "web"}))
		if got, want := feasibleNames(t, s, pod), feasibleNames(t, fresh, pod); got != want {
			t.Fatalf("key-%d: the snapshot finds %s, a fresh one %s", k, got, want)
		}
		compareScores(t, fmt.Sprintf("key-%d", k), s, objs, pod)
	}
	if len(s.loadMemos) > maxLoadMemos {
		t.Errorf("%d shapes' scores kept, at most %d", len(s.loadMemos), maxLoadMemos)
	}
	for key, f := range s.filters {
		if len(f.spreads) > maxSpreadEligibilities {
			t.Errorf("filters %s keep %d eligibilities, at most %d", key, len(f.spreads), maxSpreadEligibilities)
		}
	}
}
