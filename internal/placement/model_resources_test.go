package placement

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// TestPodRequestsMatchesTheHelper checks the fast path against
// k8s.io/component-helpers, and that init containers, sidecars and overhead
// are charged as the scheduler charges them.
func TestPodRequestsMatchesTheHelper(t *testing.T) {
	rl := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	}
	always := corev1.ContainerRestartPolicyAlways
	cases := map[string]corev1.PodSpec{
		"no requests": {Containers: []corev1.Container{{Name: "a"}}},
		"two containers": {Containers: []corev1.Container{
			{Name: "a", Resources: corev1.ResourceRequirements{Requests: rl("100m", "64Mi")}},
			{Name: "b", Resources: corev1.ResourceRequirements{Requests: rl("250m", "1Gi")}},
		}},
		"extended resource": {Containers: []corev1.Container{{Name: "a", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"example.com/gpu": resource.MustParse("2")}}}}},
		"an init container larger than the containers": {
			InitContainers: []corev1.Container{{Name: "i", Resources: corev1.ResourceRequirements{Requests: rl("2", "2Gi")}}},
			Containers:     []corev1.Container{{Name: "a", Resources: corev1.ResourceRequirements{Requests: rl("100m", "64Mi")}}},
		},
		"a sidecar adds to the containers": {
			InitContainers: []corev1.Container{{Name: "s", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: rl("500m", "128Mi")}}},
			Containers:     []corev1.Container{{Name: "a", Resources: corev1.ResourceRequirements{Requests: rl("100m", "64Mi")}}},
		},
		"overhead": {
			Overhead:   rl("50m", "10Mi"),
			Containers: []corev1.Container{{Name: "a", Resources: corev1.ResourceRequirements{Requests: rl("100m", "64Mi")}}},
		},
	}
	for name, spec := range cases {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: spec}
			want := resourcesFrom(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
			if got := podRequests(pod); !reflect.DeepEqual(got, want) {
				t.Fatalf("got %+v, want %+v", got, want)
			}
		})
	}
	sidecar := &corev1.Pod{Spec: cases["a sidecar adds to the containers"]}
	if got := podRequests(sidecar).milliCPU; got != 600 {
		t.Fatalf("a sidecar's requests add to the containers': got %dm, want 600m", got)
	}
}

// Explaining why a node does not fit adds the simulation's extras to the
// node's requests; a node's extended resources are shared by every
// evaluation and must come out of it as they went in.
func TestReasonsLeaveTheNodesRequestsAlone(t *testing.T) {
	gpuNode := mkNode("node0", func(n *corev1.Node) { n.Status.Allocatable["example.com/gpu"] = resource.MustParse("2") })
	s, err := NewSnapshot(Objects{Nodes: []*corev1.Node{gpuNode}, Pods: []*corev1.Pod{mkPod("ns", "holder", on("node0"), oneGPU)}})
	if err != nil {
		t.Fatal(err)
	}
	pod := mkPod("ns", "incoming", oneGPU)
	e, err := s.newEvaluator(pod)
	if err != nil {
		t.Fatal(err)
	}
	e.simulateBind(pod, nil, podRequests(pod), 0)
	for range 3 {
		if got := e.reasons(0); !reflect.DeepEqual(got, []string{"Insufficient example.com/gpu"}) {
			t.Fatalf("reasons = %v, want the node full of devices", got)
		}
	}
	if got := s.nodes[e.order[0]].requested.scalar["example.com/gpu"]; got != 1 {
		t.Errorf("the node's own requests hold %d devices after the explanations, want 1", got)
	}
}
