package placement

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestSimulateDrain(t *testing.T) {
	web := map[string]string{"app": "web"}
	hard := antiAffinity(term(corev1.LabelHostname, web))
	soft := func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
			{Weight: SoftWeight, PodAffinityTerm: term(corev1.LabelHostname, web)}}}}
	}
	cluster := func(nodes int, placed []string, tmpl podOpt) Objects {
		var objs Objects
		for i := range nodes {
			objs.Nodes = append(objs.Nodes, mkNode(fmt.Sprintf("n%d", i)))
		}
		for i, n := range placed {
			objs.Pods = append(objs.Pods, mkPod("ns", fmt.Sprintf("web-%d", i), on(n), withLabels("app", "web"), tmpl))
		}
		return objs
	}
	cases := []struct {
		name     string
		objs     Objects
		tmpl     podOpt
		node     string
		evicted  int
		unplaced int
		msg      string
	}{
		{name: "hard anti-affinity, replicas == nodes: the evicted pod has nowhere to go",
			objs: cluster(3, []string{"n0", "n1", "n2"}, hard), tmpl: hard, node: "n0", evicted: 1, unplaced: 1,
			msg: "1 node(s) were unschedulable, 2 " + ReasonAntiAffinity},
		{name: "hard anti-affinity with a spare node (N+1): it moves there",
			objs: cluster(4, []string{"n0", "n1", "n2"}, hard), tmpl: hard, node: "n0", evicted: 1},
		{name: "the soft stage never strands a pod",
			objs: cluster(3, []string{"n0", "n1", "n2"}, soft), tmpl: soft, node: "n0", evicted: 1},
		{name: "a node without the workload's pods evicts nothing",
			objs: cluster(4, []string{"n0", "n1", "n2"}, hard), tmpl: hard, node: "n3"},
		{name: "two pods on the drained node, one spare node: the second has nowhere to go",
			objs: cluster(3, []string{"n0", "n0", "n1"}, func(*corev1.Pod) {}), tmpl: hard, node: "n0", evicted: 2, unplaced: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSnapshot(tc.objs)
			if err != nil {
				t.Fatal(err)
			}
			w := deployment(tc.objs, "web", int32(len(tc.objs.Pods)), appsv1.DeploymentStrategy{}, tc.tmpl)
			d, err := s.SimulateDrain(w, tc.node)
			if err != nil {
				t.Fatal(err)
			}
			if d.Evicted != tc.evicted || len(d.Unplaced) != tc.unplaced || !strings.Contains(d.Message, tc.msg) {
				t.Errorf("evicted %d, unplaced %v (%s); want %d, %d (%s)", d.Evicted, d.Unplaced, d.Message, tc.evicted, tc.unplaced, tc.msg)
			}
			if again, _ := s.SimulateDrain(w, tc.node); len(again.Unplaced) != len(d.Unplaced) {
				t.Error("the simulation changed the snapshot")
			}
		})
	}
}

func TestSimulateScaleTo(t *testing.T) {
	web := map[string]string{"app": "web"}
	hard := antiAffinity(term(corev1.LabelHostname, web))
	objs := Objects{}
	for i := range 4 {
		objs.Nodes = append(objs.Nodes, mkNode(fmt.Sprintf("n%d", i)))
	}
	for i := range 3 {
		objs.Pods = append(objs.Pods, mkPod("ns", fmt.Sprintf("web-%d", i), on(fmt.Sprintf("n%d", i)), withLabels("app", "web"), hard))
	}
	s, err := NewSnapshot(objs)
	if err != nil {
		t.Fatal(err)
	}
	w := deployment(objs, "web", 3, appsv1.DeploymentStrategy{}, hard)
	for _, tc := range []struct {
		replicas, placed int32
	}{{3, 3}, {4, 4}, {6, 4}} {
		got, err := s.SimulateScaleTo(w, tc.replicas)
		if err != nil {
			t.Fatal(err)
		}
		if got.Placed != tc.placed || (got.Placed < tc.replicas) != strings.Contains(got.Message, ReasonAntiAffinity) {
			t.Errorf("scale to %d: placed %d (%s), want %d", tc.replicas, got.Placed, got.Message, tc.placed)
		}
	}
}
