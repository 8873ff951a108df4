package placement

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// fidelityCase is one rule of kube-scheduler the engine once judged
// differently, reproduced on as few nodes as it takes.
type fidelityCase struct {
	name      string
	objs      Objects
	pod       *corev1.Pod
	wantNodes []string
	wantMsg   string
}

// runFidelity checks each case on the pods as given and as the operator
// caches them (TrimPod), which must keep what the rule reads.
func runFidelity(t *testing.T, cases []fidelityCase) {
	t.Helper()
	for _, tc := range cases {
		for _, trimmed := range []bool{false, true} {
			name := tc.name
			objs := tc.objs
			if trimmed {
				name += " (trimmed pods)"
				objs.Pods = nil
				for _, p := range tc.objs.Pods {
					objs.Pods = append(objs.Pods, TrimPod(p))
				}
			}
			t.Run(name, func(t *testing.T) {
				s, err := NewSnapshot(objs)
				if err != nil {
					t.Fatal(err)
				}
				v, err := s.Schedule(tc.pod)
				if err != nil {
					t.Fatal(err)
				}
				if tc.wantMsg != "" {
					if v.Schedulable {
						t.Fatalf("want unschedulable (%s), got nodes %v", tc.wantMsg, v.Nodes)
					}
					if v.Message != tc.wantMsg {
						t.Fatalf("message\n got: %s\nwant: %s", v.Message, tc.wantMsg)
					}
					return
				}
				if !slices.Equal(v.Nodes, tc.wantNodes) {
					t.Fatalf("nodes: got %v, want %v (%s)", v.Nodes, tc.wantNodes, v.Message)
				}
			})
		}
	}
}

// resize gives a running pod's first container the allocated and actuated
// cpu of an in-place resize in flight ("" leaves one unset), and the
// PodResizePending reason when there is one.
func resize(allocatedCPU, actuatedCPU, pendingReason string) podOpt {
	return func(p *corev1.Pod) {
		cs := corev1.ContainerStatus{Name: p.Spec.Containers[0].Name, Ready: true}
		if allocatedCPU != "" {
			cs.AllocatedResources = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(allocatedCPU), corev1.ResourceMemory: resource.MustParse("1Gi")}
		}
		if actuatedCPU != "" {
			cs.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(actuatedCPU), corev1.ResourceMemory: resource.MustParse("1Gi")}}
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
		if pendingReason != "" {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: pendingReason})
		} else {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue})
		}
	}
}

// The scheduler counts a pod whose resize is in flight at the largest of its
// spec, allocated and actuated requests, and ignores the spec of a resize
// marked Infeasible (component-helpers' PodRequests with UseStatusResources).
func TestFidelityResizeInFlight(t *testing.T) {
	node := func() []*corev1.Node { return []*corev1.Node{mkNode("a", alloc("2", "4Gi", "110"))} }
	runFidelity(t, []fidelityCase{
		{
			name: "a shrink in progress still holds the larger allocation",
			objs: Objects{Nodes: node(), Pods: []*corev1.Pod{
				mkPod("ns", "resizing", on("a"), requests("500m", "1Gi"), resize("1500m", "1500m", "")),
			}},
			pod:     mkPod("ns", "p", requests("1", "1Gi")),
			wantMsg: "0/1 nodes are available: 1 Insufficient cpu.",
		},
		{
			name: "a growth allocated but not yet actuated counts the allocation",
			objs: Objects{Nodes: node(), Pods: []*corev1.Pod{
				mkPod("ns", "resizing", on("a"), requests("1500m", "1Gi"), resize("1500m", "500m", "")),
			}},
			pod:     mkPod("ns", "p", requests("1", "1Gi")),
			wantMsg: "0/1 nodes are available: 1 Insufficient cpu.",
		},
		{
			name: "an Infeasible growth counts what the pod has, not its spec",
			objs: Objects{Nodes: node(), Pods: []*corev1.Pod{
				mkPod("ns", "resizing", on("a"), requests("3", "1Gi"), resize("500m", "500m", corev1.PodReasonInfeasible)),
			}},
			pod: mkPod("ns", "p", requests("1", "1Gi")), wantNodes: []string{"a"},
		},
		{
			name: "a Deferred growth counts the larger spec",
			objs: Objects{Nodes: node(), Pods: []*corev1.Pod{
				mkPod("ns", "resizing", on("a"), requests("1500m", "1Gi"), resize("500m", "500m", corev1.PodReasonDeferred)),
			}},
			pod:     mkPod("ns", "p", requests("1", "1Gi")),
			wantMsg: "0/1 nodes are available: 1 Insufficient cpu.",
		},
		{
			name: "a settled pod whose status repeats its spec counts its spec",
			objs: Objects{Nodes: node(), Pods: []*corev1.Pod{
				mkPod("ns", "settled", on("a"), requests("1", "1Gi"), resize("1", "1", "")),
			}},
			pod: mkPod("ns", "p", requests("1", "1Gi")), wantNodes: []string{"a"},
		},
	})
}

// NodeName pins a pod to its node; scheduling gates keep it from being
// scheduled at all.
func TestFidelityNodeNameAndGates(t *testing.T) {
	nodes := func() []*corev1.Node { return []*corev1.Node{mkNode("a"), mkNode("b")} }
	runFidelity(t, []fidelityCase{
		{name: "a pod naming a node goes there alone", objs: Objects{Nodes: nodes()},
			pod: mkPod("ns", "p", on("b")), wantNodes: []string{"b"}},
		{name: "a pod naming a missing node fits nowhere", objs: Objects{Nodes: nodes()},
			pod:     mkPod("ns", "p", on("gone")),
			wantMsg: "0/2 nodes are available: 2 node(s) didn't match the requested node name."},
		{name: "a gated pod is not scheduled", objs: Objects{Nodes: nodes()},
			pod: mkPod("ns", "p", func(p *corev1.Pod) {
				p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/quota"}}
			}),
			wantMsg: GatedMessage},
	})
}

// Pods that claim devices through DynamicResources are outside what the
// engine predicts: it says so, for information, and judges the rest.
func TestDynamicResourcesReportedAsNotPredicted(t *testing.T) {
	objs := Objects{Nodes: []*corev1.Node{mkNode("node0"), mkNode("node1"), mkNode("node2")},
		Pods: []*corev1.Pod{mkPod("ns", "gpu-a", on("node0"), withLabels("app", "gpu")), mkPod("ns", "gpu-b", on("node1"), withLabels("app", "gpu"))}}
	s, err := NewSnapshot(objs)
	if err != nil {
		t.Fatal(err)
	}
	w := deployment(objs, "gpu", 2, unavailable(1), func(p *corev1.Pod) {
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptrTo("one-gpu")}}
	})
	q := Question{Workloads: []*Workload{w}, Constraint: Constraint{AntiAffinity: &AntiAffinity{TopologyKey: corev1.LabelHostname}}, Stage: pgv1.StageHard}
	for name, hazards := range map[string][]Hazard{"Findings": s.Findings(q), "Analyze": mustAnalyze(t, s, q).Hazards} {
		var found *Hazard
		for i := range hazards {
			if hazards[i].Type == HazardNotPredicted {
				found = &hazards[i]
			}
		}
		if found == nil || found.Blocking || !strings.Contains(found.Message, "DynamicResources") {
			t.Errorf("%s: want an Info NotPredicted hazard naming DynamicResources, got %+v", name, hazards)
		}
	}
}

func mustAnalyze(t *testing.T, s *Snapshot, q Question) Answer {
	t.Helper()
	a, err := s.Analyze(q)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func affinityToNodes(terms ...[]string) podOpt {
	return func(p *corev1.Pod) {
		var sel corev1.NodeSelector
		for _, names := range terms {
			sel.NodeSelectorTerms = append(sel.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
				{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: names}}})
		}
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &sel}}
	}
}

// NodeAffinity's PreFilter: a required affinity to node names leaves the
// other nodes out before any filter, in the scheduler's words.
func TestFidelityNodeAffinityToNames(t *testing.T) {
	nodes := func() []*corev1.Node { return []*corev1.Node{mkNode("a"), mkNode("b", cordoned()), mkNode("c")} }
	runFidelity(t, []fidelityCase{
		{name: "named nodes only", objs: Objects{Nodes: nodes()},
			pod: mkPod("ns", "p", affinityToNodes([]string{"a"}, []string{"b"})), wantNodes: []string{"a"}},
		{name: "the nodes left out are reported as such, whatever else they fail", objs: Objects{Nodes: nodes()},
			pod:     mkPod("ns", "p", affinityToNodes([]string{"b"})),
			wantMsg: "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) didn't satisfy plugin(s) [NodeAffinity]."},
		{name: "terms naming no node at all conflict", objs: Objects{Nodes: nodes()},
			pod: mkPod("ns", "p", func(p *corev1.Pod) {
				affinityToNodes([]string{"a"})(p)
				t := &p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0]
				t.MatchFields = append(t.MatchFields, corev1.NodeSelectorRequirement{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{"c"}})
			}),
			wantMsg: "0/3 nodes are available: pod affinity terms conflict."},
	})
}
