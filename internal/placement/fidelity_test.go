package placement

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
