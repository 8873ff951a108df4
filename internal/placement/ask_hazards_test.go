package placement

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

func selector(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

// withSelector sets the workload's own selector to app=<name>.
func withSelector(w *Workload) *Workload {
	w.Selector = selector("app", w.Name)
	return w
}

func analyze(t *testing.T, objs Objects, q Question) Answer {
	t.Helper()
	s, err := NewSnapshot(objs)
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Analyze(q)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func onlyHazard(t *testing.T, a Answer, typ string, wantIn ...string) Hazard {
	t.Helper()
	if len(a.Hazards) != 1 || a.Hazards[0].Type != typ {
		t.Fatalf("want exactly one %s hazard, got %+v", typ, a.Hazards)
	}
	for _, w := range wantIn {
		if !strings.Contains(a.Hazards[0].Message, w) {
			t.Fatalf("message %q should contain %q", a.Hazards[0].Message, w)
		}
	}
	return a.Hazards[0]
}

func TestIncident000CapacityFirst(t *testing.T) {
	oneDataNode := Objects{
		Nodes: []*corev1.Node{mkNode("data-1", label("role", "data")), mkNode("app-1", label("role", "app"))},
		Pods: []*corev1.Pod{
			mkPod("ns", "search-0", on("data-1"), withLabels("app", "search")),
			mkPod("ns", "graphdb-0", on("data-1"), withLabels("app", "graphdb")),
			mkPod("ns", "broker-0", on("app-1"), withLabels("app", "broker")),
		},
	}
	apart := Constraint{AntiAffinity: &AntiAffinity{TopologyKey: corev1.LabelHostname, Selector: selector("app", "search")}}
	capacity := CapacitySpec{NodeSelector: selector("role", "data")}
	graph := func(o Objects) *Workload {
		return withSelector(deployment(o, "graphdb", 1, appsv1.DeploymentStrategy{}, nodeSelector("role", "data")))
	}

	for _, stage := range []pgv1.Stage{pgv1.StageSoft, pgv1.StageHard} {
		a := analyze(t, oneDataNode, Question{Workloads: []*Workload{graph(oneDataNode)}, Constraint: apart, Stage: stage, Capacity: capacity})
		h := onlyHazard(t, a, HazardInsufficientCapacity, "1 of 2 qualifying nodes (role=data)")
		if !h.Blocking || a.Capacity.Summary() != "1/2" || len(a.Rollouts) != 0 {
			t.Fatalf("%s stage: capacity must be judged first, without simulating: %+v", stage, a)
		}
	}

	twoDataNodes := oneDataNode
	twoDataNodes.Nodes = append(twoDataNodes.Nodes, mkNode("data-2", label("role", "data")))
	a := analyze(t, twoDataNodes, Question{Workloads: []*Workload{graph(twoDataNodes)}, Constraint: apart, Stage: pgv1.StageHard, Capacity: capacity})
	if len(a.Hazards) != 0 {
		t.Fatalf("with a second data node nothing should stand in the way: %+v", a.Hazards)
	}
	r := a.Rollouts[pgv1.TargetRef{Kind: pgv1.KindDeployment, Name: "graphdb"}]
	if !r.Completes || len(r.Recreates) != 1 || r.Recreates[0] != "graphdb-0" {
		t.Fatalf("the rollout recreates only graphdb-0 and completes: %+v", r)
	}
	if a.Capacity.Summary() != "2/2" || strings.Join(a.Capacity.Nodes, ",") != "data-1,data-2" {
		t.Fatalf("capacity: %+v", a.Capacity)
	}
}

func TestIncident001RolloutDeadlock(t *testing.T) {
	objs := Objects{
		Nodes: []*corev1.Node{mkNode("node0"), mkNode("node1")},
		Pods: []*corev1.Pod{
			mkPod("ns", "web-a", on("node0"), withLabels("app", "web")),
			mkPod("ns", "web-b", on("node1"), withLabels("app", "web")),
		},
	}
	apart := Constraint{AntiAffinity: &AntiAffinity{TopologyKey: corev1.LabelHostname}}
	a := analyze(t, objs, Question{Workloads: []*Workload{withSelector(deployment(objs, "web", 2, appsv1.DeploymentStrategy{}))}, Constraint: apart, Stage: pgv1.StageHard})
	onlyHazard(t, a, HazardRolloutDeadlock, "maxUnavailable", "maxSurge 1", "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules.",
		"matchLabelKeys: [pod-template-hash]")

	a = analyze(t, objs, Question{Workloads: []*Workload{withSelector(deployment(objs, "web", 2, unavailable(1)))}, Constraint: apart, Stage: pgv1.StageHard})
	if len(a.Hazards) != 0 || !a.Rollouts[pgv1.TargetRef{Kind: pgv1.KindDeployment, Name: "web"}].Completes {
		t.Fatalf("with maxUnavailable 1 the rollout completes: %+v", a)
	}
	a = analyze(t, objs, Question{Workloads: []*Workload{withSelector(deployment(objs, "web", 2, appsv1.DeploymentStrategy{}))}, Constraint: apart, Stage: pgv1.StageSoft})
	if len(a.Hazards) != 0 {
		t.Fatalf("the soft stage never deadlocks: %+v", a.Hazards)
	}
}

func TestIncident002SelectorOverlapAndPinning(t *testing.T) {
	objs := Objects{
		Nodes: []*corev1.Node{mkNode("a1", zone("a")), mkNode("b1", zone("b")), mkNode("c1", zone("c"))},
		Pods: []*corev1.Pod{
			mkPod("ns", "my-app-blue-0", on("a1"), withLabels("app", "my_app", "release", "blue")),
			mkPod("ns", "my-app-blue-1", on("b1"), withLabels("app", "my_app", "release", "blue")),
			mkPod("ns", "my-app-green-0", on("c1"), withLabels("app", "my_app", "release", "green")),
		},
	}
	green := &Workload{Kind: pgv1.KindStatefulSet, Namespace: "ns", Name: "my-app-green", Replicas: 1, Selector: selector("app", "my_app", "release", "green"),
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "my_app", "release": "green"}}},
		Pods:     []types.UID{objs.Pods[2].UID}}
	shared := Constraint{Spread: &Spread{TopologyKey: corev1.LabelTopologyZone, MaxSkew: 1, Selector: selector("app", "my_app")}}
	a := analyze(t, objs, Question{Workloads: []*Workload{green}, Constraint: shared, Stage: pgv1.StageHard})
	onlyHazard(t, a, HazardSelectorOverlap, "(my-app-blue-0, my-app-blue-1)", "release")

	scoped := shared
	scoped.Spread = &Spread{TopologyKey: corev1.LabelTopologyZone, MaxSkew: 1, Selector: selector("app", "my_app"), MatchLabelKeys: []string{"release"}}
	a = analyze(t, objs, Question{Workloads: []*Workload{green}, Constraint: scoped, Stage: pgv1.StageHard})
	if len(a.Hazards) != 0 {
		t.Fatalf("matchLabelKeys [release] scopes the count: %+v", a.Hazards)
	}

	// Two green pods pinned by their volumes to zone c cannot be spread.
	pinned := pinnedToZoneC()
	db := &Workload{Kind: pgv1.KindStatefulSet, Namespace: "ns", Name: "db", Replicas: 2, Selector: selector("app", "db"),
		Template:             corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}}},
		VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}},
		Pods:                 []types.UID{pinned.Pods[0].UID, pinned.Pods[1].UID}}
	a = analyze(t, pinned, Question{Workloads: []*Workload{db}, Constraint: Constraint{Spread: &Spread{TopologyKey: corev1.LabelTopologyZone, MaxSkew: 1}}, Stage: pgv1.StageHard})
	onlyHazard(t, a, HazardVolumeZonePinning, "db-1", ReasonVolumeNodeAffinity)
}

func TestIncident004SoftSpreadOverASet(t *testing.T) {
	partOf := []string{"app.kubernetes.io/part-of", "flux"}
	objs := Objects{Nodes: []*corev1.Node{mkNode("w1"), mkNode("w2"), mkNode("w3")}}
	var workloads []*Workload
	for _, name := range []string{"source-controller", "kustomize-controller", "helm-controller", "notification-controller"} {
		objs.Pods = append(objs.Pods, mkPod("ns", name+"-x", on("w1"), withLabels("app", name, partOf[0], partOf[1])))
	}
	for _, name := range []string{"source-controller", "kustomize-controller", "helm-controller", "notification-controller"} {
		workloads = append(workloads, withSelector(deployment(objs, name, 1, appsv1.DeploymentStrategy{}, withLabels(partOf...))))
	}
	c := Constraint{Spread: &Spread{TopologyKey: corev1.LabelHostname, MaxSkew: 1, Selector: selector(partOf...)}}
	a := analyze(t, objs, Question{Workloads: workloads, Constraint: c, Stage: pgv1.StageSoft})
	if len(a.Hazards) != 0 {
		t.Fatalf("the other controllers are targets too, so the shared selector is intended: %+v", a.Hazards)
	}
	for _, w := range workloads {
		if !a.Rollouts[w.Ref()].Completes {
			t.Fatalf("%s: %+v", w.Ref(), a.Rollouts[w.Ref()])
		}
	}
}

func TestAffinityClobber(t *testing.T) {
	objs := Objects{
		Nodes: []*corev1.Node{mkNode("a", zone("a")), mkNode("b", zone("b")), mkNode("c", zone("c"))},
		Pods:  []*corev1.Pod{mkPod("ns", "web-1", on("a"), withLabels("app", "web"))},
	}
	theirs := antiAffinity(term(corev1.LabelTopologyZone, map[string]string{"app": "db"}))
	c := Constraint{AntiAffinity: &AntiAffinity{TopologyKey: corev1.LabelHostname}}
	a := analyze(t, objs, Question{Workloads: []*Workload{withSelector(deployment(objs, "web", 1, unavailable(1), theirs))}, Constraint: c, Stage: pgv1.StageHard})
	onlyHazard(t, a, HazardAffinityClobber, "1 podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution term(s)")

	a = analyze(t, objs, Question{Workloads: []*Workload{withSelector(deployment(objs, "web", 1, unavailable(1), theirs))}, Constraint: c, Stage: pgv1.StageSoft})
	if len(a.Hazards) != 0 {
		t.Fatalf("the preferred list is empty, so the soft stage clobbers nothing: %+v", a.Hazards)
	}

	zoneSpread := spread(corev1.LabelTopologyZone, 2, map[string]string{"app": "web"}, scheduleAnyway())
	sc := Constraint{Spread: &Spread{TopologyKey: corev1.LabelTopologyZone, MaxSkew: 1}}
	a = analyze(t, objs, Question{Workloads: []*Workload{withSelector(deployment(objs, "web", 1, unavailable(1), zoneSpread))}, Constraint: sc, Stage: pgv1.StageSoft})
	onlyHazard(t, a, HazardAffinityClobber, "ScheduleAnyway spread on topology.kubernetes.io/zone")
}

func TestSelectorOverlapNamesNoPodOfAnotherNamespace(t *testing.T) {
	objs := Objects{
		Nodes: []*corev1.Node{mkNode("n1"), mkNode("n2")},
		Pods: []*corev1.Pod{
			mkPod("ns", "web-0", on("n1"), withLabels("app", "web")),
			mkPod("ns", "cache-0", on("n2"), withLabels("app", "web")),
			mkPod("payments", "secret-thing-0", on("n2"), withLabels("app", "web")),
		},
	}
	w := withSelector(deployment(objs, "web", 1, appsv1.DeploymentStrategy{}))
	w.Pods = w.Pods[:1]
	apart := Constraint{AntiAffinity: &AntiAffinity{TopologyKey: corev1.LabelHostname, Selector: selector("app", "web"), Namespaces: []string{"ns", "payments"}}}
	a := analyze(t, objs, Question{Workloads: []*Workload{w}, Constraint: apart, Stage: pgv1.StageSoft})
	onlyHazard(t, a, HazardSelectorOverlap, "cache-0", "1 pod(s) in other namespaces", "selects 2 pod(s)")
	if strings.Contains(a.Hazards[0].Message, "secret-thing") || strings.Contains(a.Hazards[0].Message, "payments") {
		t.Fatalf("the message names a pod of another namespace: %s", a.Hazards[0].Message)
	}
}
