package schedulerfidelity

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An existing pod whose in-place resize is Infeasible counts, for the
// scheduler, only what its containers' statuses say is allocated and
// actuated, init containers included; the engine's cached pod must keep
// those even when they equal the spec (an independent comparison found
// the engine letting a pod in that the scheduler refused).
func TestResizeInfeasibleCountsWhatIsAllocated(t *testing.T) {
	s, err := newScheduler(t.Context().Done())
	if err != nil {
		t.Fatal(err)
	}
	cpu := func(m string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(m)}
	}
	for _, variant := range []string{"no init status", "init allocated", "init actuated", "init allocated smaller", "in progress"} {
		base := generate(1)
		base.existing = nil
		base.claims, base.volumes, base.attachments, base.capacities = nil, nil, nil, nil
		n := base.nodes[0]
		n.Spec.Taints, n.Spec.Unschedulable = nil, false
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}
		base.nodes = base.nodes[:1]
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-a", Name: "existing", UID: "e"},
			Spec: corev1.PodSpec{NodeName: n.Name, InitContainers: []corev1.Container{{Name: "init", Image: "x", Resources: corev1.ResourceRequirements{Requests: cpu("3000m")}}},
				Containers: []corev1.Container{{Name: "main", Image: "x", Resources: corev1.ResourceRequirements{Requests: cpu("250m")}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning,
				Conditions:        []corev1.PodCondition{{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "main", AllocatedResources: cpu("1000m"), Resources: &corev1.ResourceRequirements{Requests: cpu("1000m")}}}}}
		switch variant {
		case "init allocated":
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init", AllocatedResources: cpu("3000m")}}
		case "init actuated":
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init", Resources: &corev1.ResourceRequirements{Requests: cpu("3000m")}}}
		case "init allocated smaller":
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init", AllocatedResources: cpu("500m")}}
		case "in progress":
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue}}
		}
		base.existing = []*corev1.Pod{p}
		pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-a", Name: "pending", UID: "p"},
			Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, Containers: []corev1.Container{{Name: "main", Image: "x", Resources: corev1.ResourceRequirements{Requests: cpu("2000m")}}}}}
		base.pending = pending
		c, err := compare(s, base)
		if err != nil {
			t.Fatal(err)
		}
		if !c.sameNodes() || !c.sameMessage() {
			t.Errorf("%s: %s", variant, c)
		}
	}
}
