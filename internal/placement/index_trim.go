package placement

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// TrimPod returns the part of a pod that placement-guard reads: what the
// scheduler's filters and the rollout simulation use, and what the guards
// compare (identity, creation time, readiness, restarts). Everything else,
// managedFields, annotations, images, environment, probes, most of the
// status, is dropped, so a cache of every pod in a large cluster stays small.
func TrimPod(p *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{}
	trimInto(out, p)
	out.Spec.Containers = trimContainers(out.Spec.Containers)
	out.Spec.InitContainers = trimContainers(out.Spec.InitContainers)
	return out
}

// trimInto writes the part of p that TrimPod keeps over out, all but its
// containers, which it leaves as p has them: the trimmer looks up the
// containers it already keeps before it trims a copy.
func trimInto(out, p *corev1.Pod) {
	*out = corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              p.Name,
			Namespace:         p.Namespace,
			UID:               p.UID,
			ResourceVersion:   p.ResourceVersion,
			Generation:        p.Generation,
			CreationTimestamp: p.CreationTimestamp,
			DeletionTimestamp: p.DeletionTimestamp,
			Labels:            p.Labels,
			Annotations:       keptAnnotationsOf(p.Annotations),
			OwnerReferences:   p.OwnerReferences,
		},
		Spec: corev1.PodSpec{
			NodeName:                  p.Spec.NodeName,
			NodeSelector:              p.Spec.NodeSelector,
			Affinity:                  p.Spec.Affinity,
			Tolerations:               p.Spec.Tolerations,
			TopologySpreadConstraints: p.Spec.TopologySpreadConstraints,
			Overhead:                  p.Spec.Overhead,
			Resources:                 p.Spec.Resources,
			SchedulingGates:           p.Spec.SchedulingGates,
			Priority:                  p.Spec.Priority,
			Containers:                p.Spec.Containers,
			InitContainers:            p.Spec.InitContainers,
			Volumes:                   claimVolumes(p.Spec.Volumes),
		},
		Status: corev1.PodStatus{
			Phase:                 p.Status.Phase,
			Conditions:            trimConditions(p.Status.Conditions),
			ContainerStatuses:     trimStatuses(p.Status.ContainerStatuses, p.Spec.Containers, resourcehelper.IsPodResizeInfeasible(p)),
			InitContainerStatuses: trimStatuses(p.Status.InitContainerStatuses, p.Spec.InitContainers, resourcehelper.IsPodResizeInfeasible(p)),
		},
	}
}

// keptAnnotationsOf keeps the annotations the engine reads
// (KeptAnnotations): the deletion cost, by which the ReplicaSet controller
// deletes pods of lower cost first, the mark of the cost placement-guard
// wrote, and those that keep a pod from being moved.
func keptAnnotationsOf(annotations map[string]string) map[string]string {
	var out map[string]string
	for _, k := range KeptAnnotations {
		if v, ok := annotations[k]; ok {
			if out == nil {
				out = make(map[string]string, 2)
			}
			out[k] = v
		}
	}
	return out
}

// trimContainers keeps what pod requests are computed from (the requests
// and whether an init container is a sidecar) and the host ports, which
// NodePorts reads.
func trimContainers(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i := range cs {
		out[i] = corev1.Container{
			Name:          cs[i].Name,
			RestartPolicy: cs[i].RestartPolicy,
			Resources:     corev1.ResourceRequirements{Requests: cs[i].Resources.Requests},
			Ports:         hostPortsOf(cs[i].Ports),
		}
	}
	return out
}

// hostPortsOf keeps the ports bound on the node, nil when there are none
// (most pods).
func hostPortsOf(ports []corev1.ContainerPort) []corev1.ContainerPort {
	var out []corev1.ContainerPort
	for _, p := range ports {
		if p.HostPort > 0 {
			out = append(out, corev1.ContainerPort{HostIP: p.HostIP, HostPort: p.HostPort, Protocol: p.Protocol})
		}
	}
	return out
}

// claimVolumes keeps the volumes that can pin a pod: claims and generic
// ephemeral volumes, by name, and the in-tree disks written inline that
// VolumeRestrictions keeps to one writer per node or that count against a
// node's CSI volume limits; and, by name and kind alone, those that keep
// data on the node (LocalData), which a move would lose.
func claimVolumes(vs []corev1.Volume) []corev1.Volume {
	var out []corev1.Volume
	for _, v := range vs {
		switch {
		case v.PersistentVolumeClaim != nil:
			out = append(out, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: v.PersistentVolumeClaim}})
		case v.Ephemeral != nil:
			out = append(out, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}})
		case restrictedDisk(&v) || countsAgainstVolumeLimits(&v):
			out = append(out, v)
		case v.HostPath != nil:
			out = append(out, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{}}})
		case v.EmptyDir != nil && v.EmptyDir.Medium != corev1.StorageMediumMemory:
			out = append(out, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: v.EmptyDir.Medium}}})
		}
	}
	return out
}

// trimConditions keeps the Ready status (the guards) and a PodScheduled
// condition that is not True, with its message (why a pod is Pending); a
// scheduled pod's PodScheduled condition says nothing anyone reads, and
// leaving it out keeps a cached pod within its heap budget.
func trimConditions(cs []corev1.PodCondition) []corev1.PodCondition {
	var out []corev1.PodCondition
	for _, c := range cs {
		switch {
		case c.Type == corev1.PodReady:
			out = append(out, corev1.PodCondition{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime})
		case c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue:
			out = append(out, corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message, LastTransitionTime: c.LastTransitionTime})
		case c.Type == corev1.PodResizePending || c.Type == corev1.PodResizeInProgress:
			// A resize in flight changes what the scheduler counts (model_resources.go).
			out = append(out, corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason})
		}
	}
	return out
}

// trimStatuses keeps readiness and restarts (the guards), and a container's
// allocated and actuated requests where they differ from its spec: an
// in-place resize in flight, which the scheduler counts (model_resources.go).
// Where they equal the spec they change nothing and are dropped.
func trimStatuses(ss []corev1.ContainerStatus, containers []corev1.Container, infeasible bool) []corev1.ContainerStatus {
	if len(ss) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(ss))
	for i, s := range ss {
		out[i] = corev1.ContainerStatus{Name: s.Name, Ready: s.Ready, RestartCount: s.RestartCount}
		spec := specRequests(containers, s.Name)
		// Requests equal to the spec say nothing the spec does not, and are
		// dropped, but for a pod whose resize is Infeasible: the scheduler
		// then counts only what is allocated and actuated, never the spec,
		// so a container without them counts for nothing.
		if s.AllocatedResources != nil && (infeasible || !EqualResources(s.AllocatedResources, spec)) {
			out[i].AllocatedResources = s.AllocatedResources
		}
		if s.Resources != nil && s.Resources.Requests != nil && (infeasible || !EqualResources(s.Resources.Requests, spec)) {
			out[i].Resources = &corev1.ResourceRequirements{Requests: s.Resources.Requests}
		}
	}
	return out
}

func specRequests(containers []corev1.Container, name string) corev1.ResourceList {
	for i := range containers {
		if containers[i].Name == name {
			return containers[i].Resources.Requests
		}
	}
	return nil
}

// EqualResources reports whether a and b hold the same quantities.
func EqualResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, qa := range a {
		qb, ok := b[name]
		if !ok || qa.Cmp(qb) != 0 {
			return false
		}
	}
	return true
}
