package admission

import (
	"k8s.io/apimachinery/pkg/api/equality"

	corev1 "k8s.io/api/core/v1"

	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// Relevant reports whether a change must be judged: it adds or changes a
// required pod anti-affinity term or a DoNotSchedule spread, or, to a
// workload that carries one, changes what decides where its pods may go
// (Stranding) or how many there are and how they roll out. Anything else
// (an image, an annotation, an environment variable) is allowed at once,
// without asking the engine. old is nil for a create.
func Relevant(old, new *placement.Workload) bool {
	hard := planning.HardConstraints(&new.Template.Spec)
	if len(hard) == 0 {
		return false
	}
	if old == nil {
		return true
	}
	if !sameConstraints(planning.HardConstraints(&old.Template.Spec), hard) {
		return true
	}
	return old.Replicas != new.Replicas ||
		!equality.Semantic.DeepEqual(old.Strategy, new.Strategy) ||
		!equality.Semantic.DeepEqual(old.UpdateStrategy, new.UpdateStrategy) ||
		Stranding(&old.Template, &new.Template)
}

// Stranding reports a change of a pod template, beside its hard
// constraints, that can strand the pods they keep apart: its labels (a
// constraint's selector may be waiting for one), node selector, node
// affinity, tolerations, priority class, or what its containers request.
// Moving a workload to another pool, dropping a toleration, raising its
// requests past what the remaining nodes hold, or adding the label a
// harmless-looking selector was waiting for: each goes through without
// touching the constraint.
func Stranding(old, new *corev1.PodTemplateSpec) bool {
	o, n := &old.Spec, &new.Spec
	return !equality.Semantic.DeepEqual(old.Labels, new.Labels) ||
		!equality.Semantic.DeepEqual(o.NodeSelector, n.NodeSelector) ||
		!equality.Semantic.DeepEqual(nodeAffinityOf(o), nodeAffinityOf(n)) ||
		!equality.Semantic.DeepEqual(o.Tolerations, n.Tolerations) ||
		o.PriorityClassName != n.PriorityClassName ||
		!equality.Semantic.DeepEqual(o.Overhead, n.Overhead) ||
		!sameRequests(o.Containers, n.Containers) || !sameRequests(o.InitContainers, n.InitContainers)
}

func nodeAffinityOf(spec *corev1.PodSpec) *corev1.NodeAffinity {
	if spec.Affinity == nil {
		return nil
	}
	return spec.Affinity.NodeAffinity
}

// sameRequests reports containers that ask for the same resources, in
// order.
func sameRequests(a, b []corev1.Container) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !equality.Semantic.DeepEqual(a[i].Resources, b[i].Resources) {
			return false
		}
	}
	return true
}

func sameConstraints(a, b []placement.Constraint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !equality.Semantic.DeepEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}
