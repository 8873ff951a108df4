package placement

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestSimulateNodeUpgrade(t *testing.T) {
	web := map[string]string{"app": "web"}
	hard := antiAffinity(term(corev1.LabelHostname, web))
	zoneSpread := spread(corev1.LabelTopologyZone, 1, web)
	cluster := func(nodes []*corev1.Node, tmpl podOpt, placed ...string) Objects {
		objs := Objects{Nodes: nodes}
		for i, n := range placed {
			objs.Pods = append(objs.Pods, mkPod("ns", fmt.Sprintf("web-%d", i), on(n), withLabels("app", "web"), tmpl))
		}
		return objs
	}
	three := func() []*corev1.Node { return []*corev1.Node{mkNode("n0"), mkNode("n1"), mkNode("n2")} }
	cases := []struct {
		name     string
		objs     Objects
		tmpl     podOpt
		upgrade  []string
		moved    int
		unplaced []string
		stuckAt  string
		msg      string
	}{
		{name: "seed 001's shape: no drain in place succeeds, a surge of one replaces every node",
			objs: cluster(three(), hard, "n0", "n1", "n2"), tmpl: hard, upgrade: []string{"n0", "n1", "n2"}, moved: 3},
		{name: "a pod pinned to its node's hostname has nowhere to go: the upgrade stops at that node",
			objs: cluster(three(), nodeSelector(corev1.LabelHostname, "n1"), "n1"), tmpl: nodeSelector(corev1.LabelHostname, "n1"),
			upgrade: []string{"n0", "n1", "n2"}, unplaced: []string{"web-0"}, stuckAt: "n1", msg: ReasonNodeAffinity},
		{name: "a zone spread over two zones: each evicted pod stays in its zone, on the surge node",
			objs: cluster([]*corev1.Node{mkNode("a1", zone("a")), mkNode("b1", zone("b"))}, zoneSpread, "a1", "b1"),
			tmpl: zoneSpread, upgrade: []string{"a1", "b1"}, moved: 2},
		{name: "replacements accumulate: two pods on the first node, anti-affinity, one surge node takes only one",
			objs:    cluster([]*corev1.Node{mkNode("n0"), mkNode("n1")}, func(*corev1.Pod) {}, "n0", "n0", "n1"),
			tmpl:    hard,
			upgrade: []string{"n0", "n1"}, moved: 1, unplaced: []string{"web-0"}, stuckAt: "n0", msg: ReasonAntiAffinity},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSnapshot(tc.objs)
			if err != nil {
				t.Fatal(err)
			}
			w := deployment(tc.objs, "web", int32(len(tc.objs.Pods)), appsv1.DeploymentStrategy{}, tc.tmpl)
			pods, nodes := s.PodCount(), s.NodeCount()
			up, err := s.SimulateNodeUpgrade(w, tc.upgrade)
			if err != nil {
				t.Fatal(err)
			}
			if up.Moved != tc.moved || !slices.Equal(up.Unplaced, tc.unplaced) || up.StuckAt != tc.stuckAt || !strings.Contains(up.Message, tc.msg) {
				t.Errorf("moved %d, unplaced %v at %q (%s); want %d, %v at %q (%s)",
					up.Moved, up.Unplaced, up.StuckAt, up.Message, tc.moved, tc.unplaced, tc.stuckAt, tc.msg)
			}
			if tc.stuckAt == "" && !slices.Equal(up.Replaced, tc.upgrade) {
				t.Errorf("replaced %v, want %v", up.Replaced, tc.upgrade)
			}
			if s.NodeCount() != nodes {
				t.Errorf("%d nodes after the simulation, %d before", s.NodeCount(), nodes)
			}
			for _, n := range tc.objs.Nodes {
				if got := s.nodes[s.nodeByName[n.Name]].node; got != n {
					t.Errorf("node %s not restored as it was", n.Name)
				}
			}
			assertRestored(t, s, pods, tc.objs.Pods)
			again, _ := s.SimulateNodeUpgrade(w, tc.upgrade)
			if again.Moved != up.Moved || !slices.Equal(again.Unplaced, up.Unplaced) {
				t.Errorf("a second simulation answers %+v, the first %+v: the snapshot changed", again, up)
			}
		})
	}
}
