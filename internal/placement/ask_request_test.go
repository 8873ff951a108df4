package placement

import (
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

var placeholderLabels = map[string]string{"placementguard.io/capacity-request": "uid-1"}

// requestFor analyzes the final stage on objs and asks the engine for the
// capacity it lacks.
func requestFor(t *testing.T, objs Objects, w func(Objects) *Workload, c Constraint, spec CapacitySpec, maxNodes int) (CapacityRequest, *Snapshot) {
	t.Helper()
	s, err := NewSnapshot(objs)
	if err != nil {
		t.Fatal(err)
	}
	workloads := []*Workload{w(objs)}
	a, err := s.Analyze(Question{Workloads: workloads, Constraint: c, Stage: pgv1.StageHard, Capacity: spec})
	if err != nil {
		t.Fatal(err)
	}
	req, err := s.RequestCapacity(workloads, c, spec, pgv1.StageHard, a, RequestSpec{MaxNodes: maxNodes, Labels: placeholderLabels})
	if err != nil {
		t.Fatal(err)
	}
	return req, s
}

// requirement finds the node affinity requirement on key in the template's
// one required term.
func requirement(t *testing.T, req CapacityRequest, key string) *corev1.NodeSelectorRequirement {
	t.Helper()
	na := req.Template.Spec.Affinity.NodeAffinity
	if na == nil || na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	for _, term := range na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for i := range term.MatchExpressions {
			if term.MatchExpressions[i].Key == key {
				return &term.MatchExpressions[i]
			}
		}
	}
	return nil
}

// placeholdersApart reports whether the template keeps its placeholders one
// per domain of key.
func placeholdersApart(req CapacityRequest, key string) bool {
	for _, term := range req.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if term.TopologyKey == key && term.LabelSelector != nil && reflect.DeepEqual(term.LabelSelector.MatchLabels, placeholderLabels) {
			return true
		}
	}
	return false
}

func TestRequestSeed000OneDataNodeApartFromTheSearchEngine(t *testing.T) {
	objs := Objects{
		Nodes: []*corev1.Node{mkNode("data-1", label("role", "data")), mkNode("app-1", label("role", "app"))},
		Pods: []*corev1.Pod{
			mkPod("ns", "search-0", on("data-1"), withLabels("app", "search")),
			mkPod("ns", "graphdb-0", on("data-1"), withLabels("app", "graphdb"), requests("500m", "1Gi")),
		},
	}
	apart := Constraint{AntiAffinity: &AntiAffinity{TopologyKey: corev1.LabelHostname, Selector: selector("app", "search")}}
	graph := func(o Objects) *Workload {
		return withSelector(deployment(o, "graphdb", 1, appsv1.DeploymentStrategy{}, nodeSelector("role", "data"), requests("500m", "1Gi")))
	}
	req, _ := requestFor(t, objs, graph, apart, CapacitySpec{NodeSelector: selector("role", "data")}, 3)
	if req.Shortfall != 1 || req.Replicas != 1 || req.Capped() {
		t.Fatalf("seed 000 lacks one data node: %+v", req)
	}
	spec := req.Template.Spec
	// The soft stage moves the graph DB onto the new node, and the hard
	// stage's rolling update (maxSurge 1, maxUnavailable 0) surges a pod
	// beside it there: the node asked for holds two.
	if got := spec.Containers[0].Resources.Requests; !got.Cpu().Equal(resource.MustParse("1")) || !got.Memory().Equal(resource.MustParse("2Gi")) {
		t.Fatalf("the placeholder requests what two graph DB pods do: %v", got)
	}
	if !strings.Contains(req.Why, "each node asked for holds 2 pods of Deployment/graphdb") {
		t.Fatalf("the request says why it is sized so: %q", req.Why)
	}
	if spec.NodeSelector["role"] != "data" {
		t.Fatalf("the target's node selector is kept: %v", spec.NodeSelector)
	}
	if r := requirement(t, req, "role"); r == nil || r.Operator != corev1.NodeSelectorOpIn || r.Values[0] != "data" {
		t.Fatalf("the capacity's node selector is required: %+v", r)
	}
	if r := requirement(t, req, corev1.LabelHostname); r != nil {
		t.Fatalf("autoscalers refuse to provision for a hostname in node affinity: %+v", r)
	}
	if req.Resident != 0 {
		t.Fatalf("the search engine keeps the placeholder off data-1, the only data node: %+v", req)
	}
	if !placeholdersApart(req, corev1.LabelHostname) {
		t.Fatal("placeholders keep one per node")
	}
	found := false
	for _, term := range spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		found = found || term.LabelSelector.MatchLabels["app"] == "search" && term.TopologyKey == corev1.LabelHostname
	}
	if !found {
		t.Fatalf("the constraint at its final strength is carried: %+v", spec.Affinity.PodAntiAffinity)
	}
	if !reflect.DeepEqual(req.Template.Labels, placeholderLabels) {
		t.Fatalf("the placeholder carries only its own labels, never the target's: %v", req.Template.Labels)
	}
}

// A rollout that frees the node before it surges (maxUnavailable 1) needs
// a node of one pod; a target whose pod no requested node up to three
// pods can take a surge beside says so.
func TestRequestSizesTheNodesForTheStagesToCome(t *testing.T) {
	objs := Objects{
		Nodes: []*corev1.Node{mkNode("data-1", label("role", "data")), mkNode("app-1", label("role", "app"))},
		Pods: []*corev1.Pod{
			mkPod("ns", "search-0", on("data-1"), withLabels("app", "search")),
			mkPod("ns", "graphdb-0", on("data-1"), withLabels("app", "graphdb"), requests("500m", "1Gi")),
		},
	}
	apart := Constraint{AntiAffinity: &AntiAffinity{TopologyKey: corev1.LabelHostname, Selector: selector("app", "search")}}
	dataOnly := CapacitySpec{NodeSelector: selector("role", "data")}
	graph := func(strategy appsv1.DeploymentStrategy) func(Objects) *Workload {
		return func(o Objects) *Workload {
			return withSelector(deployment(o, "graphdb", 1, strategy, nodeSelector("role", "data"), requests("500m", "1Gi")))
		}
	}
	req, _ := requestFor(t, objs, graph(unavailable(1)), apart, dataOnly, 3)
	if got := req.Template.Spec.Containers[0].Resources.Requests; !got.Cpu().Equal(resource.MustParse("500m")) || strings.Contains(req.Why, "holds") {
		t.Fatalf("maxUnavailable 1 frees the node first: one pod's room, got %v (%q)", got, req.Why)
	}
	// Recreate deletes before it creates: one pod's room too.
	req, _ = requestFor(t, objs, graph(appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}), apart, dataOnly, 3)
	if got := req.Template.Spec.Containers[0].Resources.Requests; !got.Cpu().Equal(resource.MustParse("500m")) {
		t.Fatalf("Recreate: one pod's room, got %v", got)
	}
}

func TestRequestSeed001SurgeRoomOfOneNode(t *testing.T) {
	objs := Objects{
		Nodes: []*corev1.Node{mkNode("node0"), mkNode("node1")},
		Pods: []*corev1.Pod{
			mkPod("ns", "web-a", on("node0"), withLabels("app", "web")),
			mkPod("ns", "web-b", on("node1"), withLabels("app", "web")),
		},
	}
	apart := Constraint{AntiAffinity: &AntiAffinity{TopologyKey: corev1.LabelHostname}}
	web := func(o Objects) *Workload { return withSelector(deployment(o, "web", 2, appsv1.DeploymentStrategy{})) }
	req, s := requestFor(t, objs, web, apart, CapacitySpec{}, 5)
	if req.Shortfall != 1 || req.Replicas != 1 {
		t.Fatalf("replicas == nodes needs the surge room of one node: %+v", req)
	}
	if req.Resident != 0 || !placeholdersApart(req, corev1.LabelHostname) {
		t.Fatalf("the web pods keep the placeholder off both nodes, so it needs a new one: %+v", req)
	}
	if s.NodeCount() != 2 {
		t.Fatalf("the simulated nodes are taken out again: %d nodes", s.NodeCount())
	}
	a, err := s.Analyze(Question{Workloads: []*Workload{web(objs)}, Constraint: apart, Stage: pgv1.StageHard})
	if err != nil || a.FirstBlocking() == nil || a.FirstBlocking().Type != HazardRolloutDeadlock {
		t.Fatalf("the snapshot is as it was: %v %+v", err, a.Hazards)
	}

	// With maxUnavailable 1 nothing is missing.
	req, _ = requestFor(t, objs, func(o Objects) *Workload { return withSelector(deployment(o, "web", 2, unavailable(1))) }, apart, CapacitySpec{}, 5)
	if req.Shortfall != 0 || req.Replicas != 0 {
		t.Fatalf("a rollout that completes asks for nothing: %+v", req)
	}
}

func TestRequestZoneSpreadOneNodePerMissingZone(t *testing.T) {
	objs := Objects{
		Nodes: []*corev1.Node{mkNode("a1", zone("a")), mkNode("a2", zone("a"))},
		Pods:  []*corev1.Pod{mkPod("ns", "api-0", on("a1"), withLabels("app", "api"))},
	}
	spread := Constraint{Spread: &Spread{TopologyKey: corev1.LabelTopologyZone, MaxSkew: 1, MinDomains: ptrTo(int32(3))}}
	api := func(o Objects) *Workload { return withSelector(deployment(o, "api", 3, appsv1.DeploymentStrategy{})) }
	req, _ := requestFor(t, objs, api, spread, CapacitySpec{}, 5)
	if req.Shortfall != 2 || req.Replicas != 2 {
		t.Fatalf("one zone of three: two nodes, one in each missing zone: %+v", req)
	}
	if r := requirement(t, req, corev1.LabelTopologyZone); r == nil || r.Operator != corev1.NodeSelectorOpNotIn || !reflect.DeepEqual(r.Values, []string{"a"}) {
		t.Fatalf("the new nodes must be outside zone a: %+v", r)
	}
	if !placeholdersApart(req, corev1.LabelTopologyZone) {
		t.Fatal("placeholders keep one per zone")
	}
	for _, c := range req.Template.Spec.TopologySpreadConstraints {
		if len(c.MatchLabelKeys) != 0 {
			t.Fatalf("matchLabelKeys would be read from the placeholder's labels: %+v", c)
		}
	}

	// maxNodes bounds what is asked for, and says so.
	req, _ = requestFor(t, objs, api, spread, CapacitySpec{}, 1)
	if req.Shortfall != 2 || req.Replicas != 1 || !req.Capped() {
		t.Fatalf("maxNodes 1 caps the request: %+v", req)
	}
}

func TestRequestMoreNodesInQualifyingZones(t *testing.T) {
	objs := Objects{Nodes: []*corev1.Node{mkNode("a1", zone("a")), mkNode("b1", zone("b"))}}
	spread := Constraint{Spread: &Spread{TopologyKey: corev1.LabelTopologyZone, MaxSkew: 1}}
	api := func(o Objects) *Workload { return withSelector(deployment(o, "api", 2, appsv1.DeploymentStrategy{})) }
	req, _ := requestFor(t, objs, api, spread, CapacitySpec{MinNodes: ptrTo(int32(4))}, 10)
	if req.Shortfall != 2 || req.Resident != 2 || req.Replicas != 4 {
		t.Fatalf("minNodes 4 on two empty nodes: two placeholders take them, two more need new nodes: %+v", req)
	}
	if requirement(t, req, corev1.LabelTopologyZone) != nil || requirement(t, req, corev1.LabelHostname) != nil {
		t.Fatal("the zones are enough; new nodes may join them")
	}
	if !placeholdersApart(req, corev1.LabelHostname) {
		t.Fatal("placeholders keep one per node")
	}
}

func TestRequestSizedCountsLaunchedNodesAgainstMaxNodes(t *testing.T) {
	for _, tc := range []struct {
		name                        string
		req                         CapacityRequest
		launched, maxNodes          int
		wantPlaceholders, wantNodes int
	}{
		{"first ask, capped", CapacityRequest{Shortfall: 2}, 0, 1, 1, 1},
		{"the node asked for came: its placeholder stays, nothing more is asked", CapacityRequest{Shortfall: 1, Resident: 1}, 1, 1, 1, 0},
		{"room left under maxNodes", CapacityRequest{Shortfall: 1, Resident: 1}, 1, 5, 2, 1},
		{"qualifying nodes went away: nothing counts as launched", CapacityRequest{Shortfall: 3}, -1, 5, 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, n := tc.req.Sized(tc.launched, tc.maxNodes)
			if p != tc.wantPlaceholders || n != tc.wantNodes {
				t.Fatalf("Sized(%d, %d) = %d placeholders, %d nodes; want %d, %d", tc.launched, tc.maxNodes, p, n, tc.wantPlaceholders, tc.wantNodes)
			}
		})
	}
}

func TestRequestNothingWhenEnough(t *testing.T) {
	objs := Objects{Nodes: []*corev1.Node{mkNode("n1"), mkNode("n2"), mkNode("n3")}}
	apart := Constraint{AntiAffinity: &AntiAffinity{TopologyKey: corev1.LabelHostname}}
	req, _ := requestFor(t, objs, func(o Objects) *Workload { return withSelector(deployment(o, "web", 2, appsv1.DeploymentStrategy{})) }, apart, CapacitySpec{}, 3)
	if req.Replicas != 0 || req.Shortfall != 0 {
		t.Fatalf("enough capacity asks for nothing: %+v", req)
	}
}

func TestPlaceholderPodsHoldNoCapacity(t *testing.T) {
	placeholder := func(priority int32) *corev1.Pod {
		p := mkPod("ns", "capacity-x", on("data-2"), withLabels(PlaceholderLabel, "uid-1"), requests("4", "8Gi"))
		p.Spec.Priority = &priority
		return p
	}
	for _, tc := range []struct {
		name     string
		priority int32
		counted  bool
	}{
		{"negative priority: preempted by any real pod, so not counted", -10, false},
		{"a pod labelled so but not preemptible still counts", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := Objects{
				Nodes: []*corev1.Node{mkNode("data-1", label("role", "data")), mkNode("data-2", label("role", "data"))},
				Pods:  []*corev1.Pod{placeholder(tc.priority)},
			}
			s, err := NewSnapshot(objs)
			if err != nil {
				t.Fatal(err)
			}
			c, err := s.CapacityFor([]*Workload{withSelector(deployment(objs, "graphdb", 1, appsv1.DeploymentStrategy{}, requests("1", "1Gi")))},
				Constraint{AntiAffinity: &AntiAffinity{TopologyKey: corev1.LabelHostname, Selector: selector("app", "search")}}, CapacitySpec{})
			if err != nil {
				t.Fatal(err)
			}
			if qualifies := c.QualifyingNodes == 2; qualifies == tc.counted {
				t.Fatalf("data-2 qualifies=%v with the pod counted=%v: %+v", qualifies, tc.counted, c)
			}
		})
	}
}

// A node launched for a request counts against maxNodes from the moment it
// registers, Ready or not and tainted or not, and only if the placeholders
// could land on it by node selection.
func TestLaunchedForCountsNodesTheRequestCouldLandOnSinceItWasMade(t *testing.T) {
	objs := Objects{
		Nodes: []*corev1.Node{mkNode("data-1", label("role", "data")), mkNode("app-1", label("role", "app"))},
		Pods:  []*corev1.Pod{mkPod("ns", "search-0", on("data-1"), withLabels("app", "search"))},
	}
	apart := Constraint{AntiAffinity: &AntiAffinity{TopologyKey: corev1.LabelHostname, Selector: selector("app", "search")}}
	graph := func(o Objects) *Workload {
		return withSelector(deployment(o, "graphdb", 1, appsv1.DeploymentStrategy{}, nodeSelector("role", "data")))
	}
	spec := CapacitySpec{NodeSelector: selector("role", "data")}
	req, s := requestFor(t, objs, graph, apart, spec, 1)
	made := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	w := graph(objs)
	launched := func(existed func(string) bool) []string {
		names, err := s.LaunchedFor(w, spec, made, existed)
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	joined := func(name string, at time.Time, labels ...string) {
		n := mkNode(name, label(labels[0], labels[1]))
		n.CreationTimestamp = metav1.NewTime(at)
		n.Spec.Taints = []corev1.Taint{{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
		s.UpsertNode(n)
	}
	for _, c := range []struct {
		name string
		join func()
		want int
	}{
		{"nothing joined", func() {}, 0},
		{"an app node joined: not for the request", func() { joined("app-2", made.Add(time.Second), "role", "app") }, 0},
		{"a data node from before the request", func() { joined("data-0", made.Add(-time.Hour), "role", "data") }, 0},
		{"a data node registering, tainted and not Ready", func() { joined("data-2", made.Add(2*time.Second), "role", "data") }, 1},
		{"a second one", func() { joined("data-3", made.Add(3*time.Second), "role", "data") }, 2},
		{"one launched within the request's own second", func() { joined("data-4", made.Add(400*time.Millisecond).Truncate(time.Second), "role", "data") }, 3},
		{"one of the request's own second that was there when it was made", func() { joined("data-5", made, "role", "data") }, 3},
	} {
		c.join()
		if got := len(launched(func(n string) bool { return n == "data-1" || n == "app-1" || n == "data-5" })); got != c.want {
			t.Errorf("%s: %d nodes launched for the request, want %d", c.name, got, c.want)
		}
	}
	if n := len(launched(nil)); n != 2 {
		t.Fatalf("with no word of the nodes there were, one of the request's own second is not named: %d named", n)
	}
	if placeholders, nodes := req.Sized(len(launched(nil)), 1); placeholders != 0 || nodes != 0 {
		t.Fatalf("maxNodes 1 with nodes launched asks for nothing more: %d placeholders, %d nodes", placeholders, nodes)
	}
}
