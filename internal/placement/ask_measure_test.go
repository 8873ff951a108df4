package placement

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

func TestMeasure(t *testing.T) {
	web := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	hostname := Constraint{AntiAffinity: &AntiAffinity{TopologyKey: corev1.LabelHostname}}
	awayFromSearch := Constraint{AntiAffinity: &AntiAffinity{TopologyKey: corev1.LabelHostname, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "search"}}}}
	zoneSpread := func(maxSkew int32, mods ...func(*Spread)) Constraint {
		s := &Spread{TopologyKey: corev1.LabelTopologyZone, MaxSkew: maxSkew}
		for _, m := range mods {
			m(s)
		}
		return Constraint{Spread: s}
	}
	threeZones := []*corev1.Node{mkNode("a1", zone("a")), mkNode("b1", zone("b")), mkNode("c1", zone("c"))}
	webPod := func(name, node string, extra ...string) *corev1.Pod {
		return mkPod("ns", name, on(node), withLabels(append([]string{"app", "web"}, extra...)...))
	}
	cases := []struct {
		name       string
		nodes      []*corev1.Node
		pods       []*corev1.Pod
		constraint Constraint
		holds      bool
		skew       int
	}{
		{
			name:       "replicas on distinct hosts hold",
			nodes:      []*corev1.Node{mkNode("n1"), mkNode("n2")},
			pods:       []*corev1.Pod{webPod("web-1", "n1"), webPod("web-2", "n2")},
			constraint: hostname, holds: true,
		},
		{
			name:       "two replicas on one host break anti-affinity",
			nodes:      []*corev1.Node{mkNode("n1"), mkNode("n2")},
			pods:       []*corev1.Pod{webPod("web-1", "n1"), webPod("web-2", "n1")},
			constraint: hostname, holds: false, skew: 1,
		},
		{
			name:       "a pending replica is not measured",
			nodes:      []*corev1.Node{mkNode("n1")},
			pods:       []*corev1.Pod{webPod("web-1", "n1"), webPod("web-2", "")},
			constraint: hostname, holds: true,
		},
		{
			name:       "apart from another workload: sharing a host with it breaks",
			nodes:      []*corev1.Node{mkNode("n1"), mkNode("n2")},
			pods:       []*corev1.Pod{webPod("web-1", "n1"), mkPod("ns", "search-1", on("n1"), withLabels("app", "search"))},
			constraint: awayFromSearch, holds: false, skew: 1,
		},
		{
			name:       "apart from another workload: a terminating neighbour does not count",
			nodes:      []*corev1.Node{mkNode("n1")},
			pods:       []*corev1.Pod{webPod("web-1", "n1"), mkPod("ns", "search-1", on("n1"), withLabels("app", "search"), terminating())},
			constraint: awayFromSearch, holds: true,
		},
		{
			name:       "even spread over three zones",
			nodes:      threeZones,
			pods:       []*corev1.Pod{webPod("w1", "a1"), webPod("w2", "b1"), webPod("w3", "c1"), webPod("w4", "a1")},
			constraint: zoneSpread(1), holds: true, skew: 1,
		},
		{
			name:       "an empty eligible zone counts as the minimum",
			nodes:      threeZones,
			pods:       []*corev1.Pod{webPod("w1", "a1"), webPod("w2", "a1"), webPod("w3", "b1")},
			constraint: zoneSpread(1), holds: false, skew: 2,
		},
		{
			name:  "a zone the pods may not run in is not eligible",
			nodes: threeZones,
			pods: func() []*corev1.Pod {
				ps := []*corev1.Pod{webPod("w1", "a1"), webPod("w2", "b1")}
				for _, p := range ps {
					p.Spec.NodeSelector = map[string]string{corev1.LabelTopologyZone + "-x": "y"}
					p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
						NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}}}}},
					}}}
					p.Spec.NodeSelector = nil
				}
				return ps
			}(),
			constraint: zoneSpread(1), holds: true, skew: 0,
		},
		{
			name:       "nodeAffinityPolicy Ignore counts every zone",
			nodes:      threeZones,
			pods:       []*corev1.Pod{webPod("w1", "a1", "tier", "x"), webPod("w2", "a1", "tier", "x")},
			constraint: zoneSpread(1, func(s *Spread) { s.NodeAffinityPolicy = ptr.To(corev1.NodeInclusionPolicyIgnore) }), holds: false, skew: 2,
		},
		{
			name:       "a tainted zone counts unless nodeTaintsPolicy is Honor",
			nodes:      []*corev1.Node{mkNode("a1", zone("a")), mkNode("b1", zone("b"), taint("dedicated", "db", corev1.TaintEffectNoSchedule))},
			pods:       []*corev1.Pod{webPod("w1", "a1"), webPod("w2", "a1")},
			constraint: zoneSpread(1, func(s *Spread) { s.NodeTaintsPolicy = ptr.To(corev1.NodeInclusionPolicyHonor) }), holds: true, skew: 0,
		},
		{
			name:       "minDomains above the eligible domains makes the minimum zero",
			nodes:      threeZones[:2],
			pods:       []*corev1.Pod{webPod("w1", "a1"), webPod("w2", "b1")},
			constraint: zoneSpread(1, func(s *Spread) { s.MinDomains = ptr.To[int32](3) }), holds: true, skew: 1,
		},
		{
			name:  "matchLabelKeys leaves the other release uncounted",
			nodes: threeZones,
			pods: []*corev1.Pod{
				webPod("green-1", "a1", "release", "green"), webPod("green-2", "b1", "release", "green"),
				webPod("blue-1", "c1", "release", "blue"), webPod("blue-2", "c1", "release", "blue"), webPod("blue-3", "c1", "release", "blue"),
			},
			constraint: zoneSpread(1, func(s *Spread) { s.MatchLabelKeys = []string{"release"} }), holds: true, skew: 1,
		},
		{
			name:  "without matchLabelKeys the other release is counted",
			nodes: threeZones,
			pods: []*corev1.Pod{
				webPod("green-1", "a1", "release", "green"), webPod("green-2", "b1", "release", "green"),
				webPod("blue-1", "c1", "release", "blue"), webPod("blue-2", "c1", "release", "blue"), webPod("blue-3", "c1", "release", "blue"),
			},
			constraint: zoneSpread(1), holds: false, skew: 2,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap, err := NewSnapshot(Objects{Nodes: tc.nodes, Pods: tc.pods, Namespaces: []*corev1.Namespace{mkNamespace("ns")}})
			if err != nil {
				t.Fatal(err)
			}
			w := &Workload{Kind: pgv1.KindDeployment, Namespace: "ns", Name: "web", Selector: web}
			for _, p := range tc.pods {
				if p.Labels["app"] == "web" && p.Labels["release"] != "blue" {
					w.Pods = append(w.Pods, p.UID)
				}
			}
			m, err := snap.Measure(w, tc.constraint)
			if err != nil {
				t.Fatal(err)
			}
			if m.Holds != tc.holds || m.Skew != tc.skew {
				t.Fatalf("holds=%v skew=%d, want holds=%v skew=%d: %s", m.Holds, m.Skew, tc.holds, tc.skew, m.Summary)
			}
			if m.Summary == "" {
				t.Fatal("a measurement always says what it found")
			}
		})
	}
}

func TestMeasureWithoutPods(t *testing.T) {
	snap, _ := NewSnapshot(Objects{})
	m, err := snap.Measure(&Workload{Kind: pgv1.KindDeployment, Name: "web", Pods: []types.UID{"gone"}}, Constraint{AntiAffinity: &AntiAffinity{TopologyKey: corev1.LabelHostname}})
	if err != nil || !m.Holds {
		t.Fatalf("%+v %v", m, err)
	}
}
