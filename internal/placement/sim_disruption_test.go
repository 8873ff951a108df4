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

func TestSimulateDrainHonorsTaintsPolicy(t *testing.T) {
	// One node per zone: a drain takes a whole zone out. The cordoned node
	// keeps its zone in the count under nodeTaintsPolicy Ignore, so the
	// evicted pod cannot go to a zone that has one already; under Honor the
	// cordoned node's taint takes the zone out of the count.
	web := map[string]string{"app": "web"}
	for _, tc := range []struct {
		policy   corev1.NodeInclusionPolicy
		unplaced int
	}{{corev1.NodeInclusionPolicyIgnore, 1}, {corev1.NodeInclusionPolicyHonor, 0}} {
		t.Run(string(tc.policy), func(t *testing.T) {
			tmpl := spread(corev1.LabelTopologyZone, 1, web, taintsPolicy(tc.policy))
			objs := zonedCluster(1, []string{"a-0", "b-0", "c-0"}, tmpl)
			s, err := NewSnapshot(objs)
			if err != nil {
				t.Fatal(err)
			}
			d, err := s.SimulateDrain(deployment(objs, "web", 3, appsv1.DeploymentStrategy{}, tmpl), "a-0")
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Unplaced) != tc.unplaced {
				t.Errorf("unplaced %v (%s), want %d", d.Unplaced, d.Message, tc.unplaced)
			}
		})
	}
}

func TestSimulateDomainLoss(t *testing.T) {
	web := map[string]string{"app": "web"}
	zoneSpread := func(opts ...spreadOpt) podOpt { return spread(corev1.LabelTopologyZone, 1, web, opts...) }
	apart := antiAffinity(term(corev1.LabelHostname, web))
	oneEach := []string{"a-0", "b-0", "c-0"}
	cases := []struct {
		name     string
		perZone  int
		placed   []string
		tmpl     podOpt
		zone     string
		evicted  int
		unplaced int
		msg      string
	}{
		{name: "DoNotSchedule maxSkew 1 (nodeTaintsPolicy Ignore): the lost zone still counts, with none of the pods",
			perZone: 2, placed: oneEach, tmpl: zoneSpread(), zone: "zone-a", evicted: 1, unplaced: 1,
			msg: "2 node(s) had untolerated taint(s), 4 " + ReasonSpread},
		{name: "maxSkew 2 tolerates the lost zone",
			perZone: 2, placed: oneEach, tmpl: spread(corev1.LabelTopologyZone, 2, web), zone: "zone-a", evicted: 1},
		{name: "nodeTaintsPolicy Honor: the unreachable nodes count for no domain",
			perZone: 2, placed: oneEach, tmpl: zoneSpread(taintsPolicy(corev1.NodeInclusionPolicyHonor)), zone: "zone-a", evicted: 1},
		{name: "Honor with minDomains 3: two domains left, the minimum counts as 0",
			perZone: 2, placed: oneEach, tmpl: zoneSpread(taintsPolicy(corev1.NodeInclusionPolicyHonor), minDomains(3)), zone: "zone-a", evicted: 1, unplaced: 1,
			msg: ReasonSpread},
		{name: "ScheduleAnyway never keeps a pod out",
			perZone: 2, placed: oneEach, tmpl: zoneSpread(scheduleAnyway()), zone: "zone-a", evicted: 1},
		{name: "hostname anti-affinity on every node: the other zones have no free node",
			perZone: 2, placed: []string{"a-0", "a-1", "b-0", "b-1", "c-0", "c-1"}, tmpl: apart, zone: "zone-b", evicted: 2, unplaced: 2,
			msg: ReasonAntiAffinity},
		{name: "a zone the workload does not run in evicts nothing",
			perZone: 2, placed: []string{"a-0", "b-0"}, tmpl: zoneSpread(), zone: "zone-c"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := zonedCluster(tc.perZone, tc.placed, tc.tmpl)
			s, err := NewSnapshot(objs)
			if err != nil {
				t.Fatal(err)
			}
			w := deployment(objs, "web", int32(len(tc.placed)), appsv1.DeploymentStrategy{}, tc.tmpl)
			got, err := s.SimulateDomainLoss(w, corev1.LabelTopologyZone, tc.zone)
			if err != nil {
				t.Fatal(err)
			}
			if got.Nodes != tc.perZone || got.Evicted != tc.evicted || len(got.Unplaced) != tc.unplaced || !strings.Contains(got.Message, tc.msg) {
				t.Errorf("nodes %d, evicted %d, unplaced %v (%s); want %d, %d, %d (%s)",
					got.Nodes, got.Evicted, got.Unplaced, got.Message, tc.perZone, tc.evicted, tc.unplaced, tc.msg)
			}
			if again, _ := s.SimulateDomainLoss(w, corev1.LabelTopologyZone, tc.zone); len(again.Unplaced) != len(got.Unplaced) {
				t.Error("the simulation changed the snapshot")
			}
		})
	}
	objs := zonedCluster(1, oneEach, zoneSpread())
	s, err := NewSnapshot(objs)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.DomainsOf(deployment(objs, "web", 3, appsv1.DeploymentStrategy{}), corev1.LabelTopologyZone); strings.Join(got, ",") != "zone-a,zone-b,zone-c" {
		t.Errorf("DomainsOf = %v", got)
	}
}

// zonedCluster has perZone nodes in each of zones a, b and c, named
// "a-0", "a-1", …, and a pod of web on each node of placed.
func zonedCluster(perZone int, placed []string, tmpl podOpt) Objects {
	var objs Objects
	for _, z := range []string{"a", "b", "c"} {
		for i := range perZone {
			objs.Nodes = append(objs.Nodes, mkNode(fmt.Sprintf("%s-%d", z, i), zone("zone-"+z)))
		}
	}
	for i, n := range placed {
		objs.Pods = append(objs.Pods, mkPod("ns", fmt.Sprintf("web-%d", i), on(n), withLabels("app", "web"), tmpl))
	}
	return objs
}
