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
// constraints, that can strand the pods they keep apart: what decides
// where a pod may go or what it needs there. Its labels (a constraint's
// selector may be waiting for one), node name, node selector, node
// affinity, required pod affinity, tolerations, priority class, runtime
// class (its overhead and node selector), scheduling gates, host network
// and host ports, the volumes it claims (a zonal or ReadWriteOncePod
// claim holds a pod to a node or a domain), or what its containers
// request. Moving a workload to another pool, dropping a toleration,
// binding a port the old pods hold, claiming a volume another pod holds
// alone, raising its requests past what the remaining nodes hold, or
// adding the label a harmless-looking selector was waiting for: each goes
// through without touching the constraint.
func Stranding(old, new *corev1.PodTemplateSpec) bool {
	o, n := &old.Spec, &new.Spec
	return !equality.Semantic.DeepEqual(old.Labels, new.Labels) ||
		o.NodeName != n.NodeName ||
		!equality.Semantic.DeepEqual(o.NodeSelector, n.NodeSelector) ||
		!equality.Semantic.DeepEqual(nodeAffinityOf(o), nodeAffinityOf(n)) ||
		!equality.Semantic.DeepEqual(podAffinityOf(o), podAffinityOf(n)) ||
		!equality.Semantic.DeepEqual(o.Tolerations, n.Tolerations) ||
		o.PriorityClassName != n.PriorityClassName ||
		!equality.Semantic.DeepEqual(o.RuntimeClassName, n.RuntimeClassName) ||
		!equality.Semantic.DeepEqual(o.Overhead, n.Overhead) ||
		!equality.Semantic.DeepEqual(o.SchedulingGates, n.SchedulingGates) ||
		o.HostNetwork != n.HostNetwork ||
		!equality.Semantic.DeepEqual(claimsOf(o), claimsOf(n)) ||
		!sameRequests(o.Containers, n.Containers) || !sameRequests(o.InitContainers, n.InitContainers)
}

// podAffinityOf is a pod spec's required pod affinity terms: they hold a
// pod to the domains of the pods they select.
func podAffinityOf(spec *corev1.PodSpec) []corev1.PodAffinityTerm {
	if spec.Affinity == nil || spec.Affinity.PodAffinity == nil {
		return nil
	}
	return spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution
}

// claimsOf are the volumes of a pod spec that claim storage: persistent
// volume claims and ephemeral volumes, whose claims are made for the pod.
func claimsOf(spec *corev1.PodSpec) []corev1.Volume {
	var out []corev1.Volume
	for _, v := range spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			out = append(out, v)
		}
	}
	return out
}

func nodeAffinityOf(spec *corev1.PodSpec) *corev1.NodeAffinity {
	if spec.Affinity == nil {
		return nil
	}
	return spec.Affinity.NodeAffinity
}

// sameRequests reports containers that ask for the same resources and
// the same host ports, in order.
func sameRequests(a, b []corev1.Container) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !equality.Semantic.DeepEqual(a[i].Resources, b[i].Resources) || !equality.Semantic.DeepEqual(hostPorts(a[i]), hostPorts(b[i])) {
			return false
		}
	}
	return true
}

// hostPorts are a container's ports bound on the node.
func hostPorts(c corev1.Container) []corev1.ContainerPort {
	var out []corev1.ContainerPort
	for _, p := range c.Ports {
		if p.HostPort != 0 {
			out = append(out, p)
		}
	}
	return out
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
