package placement

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// resources is the part of a resource list the fit check compares, in the
// units the scheduler uses: milli-CPU, bytes, and a pod count.
type resources struct {
	milliCPU         int64
	memory           int64
	ephemeralStorage int64
	scalar           map[corev1.ResourceName]int64
}

func resourcesFrom(list corev1.ResourceList) resources {
	var r resources
	r.addList(list)
	return r
}

// addList adds a resource list to r.
func (r *resources) addList(list corev1.ResourceList) {
	for name, q := range list {
		switch name {
		case corev1.ResourceCPU:
			r.milliCPU += q.MilliValue()
		case corev1.ResourceMemory:
			r.memory += q.Value()
		case corev1.ResourceEphemeralStorage:
			r.ephemeralStorage += q.Value()
		case corev1.ResourcePods:
			// Counted separately, as allowedPodNumber.
		default:
			if isScalarResource(name) {
				if r.scalar == nil {
					r.scalar = map[corev1.ResourceName]int64{}
				}
				r.scalar[name] += q.Value()
			}
		}
	}
}

// isScalarResource reports whether the scheduler's fit check counts a
// resource besides cpu, memory, ephemeral storage and the pod count:
// extended resources, hugepages and attachable volumes.
func isScalarResource(name corev1.ResourceName) bool {
	return name != corev1.ResourceStorage
}

func (r *resources) add(o resources) {
	r.milliCPU += o.milliCPU
	r.memory += o.memory
	r.ephemeralStorage += o.ephemeralStorage
	for k, v := range o.scalar {
		if r.scalar == nil {
			r.scalar = map[corev1.ResourceName]int64{}
		}
		r.scalar[k] += v
	}
}

// equal reports whether r and o request the same, a missing scalar being
// a zero one.
func (r resources) equal(o resources) bool {
	if r.milliCPU != o.milliCPU || r.memory != o.memory || r.ephemeralStorage != o.ephemeralStorage {
		return false
	}
	for k, v := range r.scalar {
		if o.scalar[k] != v {
			return false
		}
	}
	for k, v := range o.scalar {
		if r.scalar[k] != v {
			return false
		}
	}
	return true
}

func (r *resources) sub(o resources) {
	r.milliCPU -= o.milliCPU
	r.memory -= o.memory
	r.ephemeralStorage -= o.ephemeralStorage
	for k, v := range o.scalar {
		if r.scalar == nil {
			r.scalar = map[corev1.ResourceName]int64{}
		}
		r.scalar[k] -= v
	}
}

// plus is r and o together, r left as it is: r's scalars may be a node's,
// shared with every evaluation.
func (r resources) plus(o resources) resources {
	sum := resources{milliCPU: r.milliCPU, memory: r.memory, ephemeralStorage: r.ephemeralStorage}
	if len(r.scalar) > 0 || len(o.scalar) > 0 {
		sum.scalar = make(map[corev1.ResourceName]int64, len(r.scalar)+len(o.scalar))
		for k, v := range r.scalar {
			sum.scalar[k] = v
		}
	}
	sum.add(o)
	return sum
}

// minus is r without o, r left as it is, as plus.
func (r resources) minus(o resources) resources {
	out := r.plus(resources{})
	if len(o.scalar) > 0 && out.scalar == nil {
		out.scalar = make(map[corev1.ResourceName]int64, len(o.scalar))
	}
	out.sub(o)
	return out
}

// podRequests is what the scheduler charges a node for a pod: the larger of
// the init containers' and the sum of the regular and sidecar containers'
// requests, plus overhead, as k8s.io/component-helpers computes it. For a
// pod whose in-place resize is in flight, each container counts the largest
// of its spec, allocated and actuated requests (the spec not at all when the
// resize is Infeasible), as the scheduler counts the pods on a node.
func podRequests(pod *corev1.Pod) resources {
	spec := &pod.Spec
	if resizing(pod) {
		return resourcesFrom(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{UseStatusResources: true}))
	}
	if len(spec.InitContainers) == 0 && spec.Overhead == nil && spec.Resources == nil {
		// Most pods: the requests are the sum of the containers', and adding
		// them up here spares the helper's intermediate lists, which were
		// most of what indexing 150,000 pods allocated.
		var r resources
		for i := range spec.Containers {
			r.addList(spec.Containers[i].Resources.Requests)
		}
		return r
	}
	return resourcesFrom(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
}

// resizing reports whether a pod's status carries resources of its own: an
// in-place resize in progress, pending or infeasible.
func resizing(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodResizePending || c.Type == corev1.PodResizeInProgress {
			return true
		}
	}
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for i := range statuses {
			if statuses[i].AllocatedResources != nil || (statuses[i].Resources != nil && statuses[i].Resources.Requests != nil) {
				return true
			}
		}
	}
	return false
}

// ReasonTooManyPods is the scheduler's reason for a node that holds as
// many pods as it admits.
const ReasonTooManyPods = "Too many pods"

// insufficient lists the scheduler's reasons why req does not fit in the
// free part of alloc, in the scheduler's order.
func insufficient(req, requested, alloc resources, allowedPods, pods int64) []string {
	var reasons []string
	if pods+1 > allowedPods {
		reasons = append(reasons, ReasonTooManyPods)
	}
	if req.milliCPU == 0 && req.memory == 0 && req.ephemeralStorage == 0 && len(req.scalar) == 0 {
		return reasons
	}
	if req.milliCPU > 0 && req.milliCPU > alloc.milliCPU-requested.milliCPU {
		reasons = append(reasons, "Insufficient cpu")
	}
	if req.memory > 0 && req.memory > alloc.memory-requested.memory {
		reasons = append(reasons, "Insufficient memory")
	}
	if req.ephemeralStorage > 0 && req.ephemeralStorage > alloc.ephemeralStorage-requested.ephemeralStorage {
		reasons = append(reasons, "Insufficient ephemeral-storage")
	}
	names := make([]string, 0, len(req.scalar))
	for name, v := range req.scalar {
		if v > 0 && v > alloc.scalar[name]-requested.scalar[name] {
			names = append(names, "Insufficient "+string(name))
		}
	}
	sort.Strings(names)
	reasons = append(reasons, names...)
	return reasons
}

// fitsIn reports whether requests r fit in what a node has left: its
// allocatable less what its pods and a simulation's placements request.
func (r resources) fitsIn(alloc, requested, extra resources) bool {
	if r.milliCPU == 0 && r.memory == 0 && r.ephemeralStorage == 0 && len(r.scalar) == 0 {
		return true
	}
	if r.milliCPU > 0 && r.milliCPU > alloc.milliCPU-requested.milliCPU-extra.milliCPU {
		return false
	}
	if r.memory > 0 && r.memory > alloc.memory-requested.memory-extra.memory {
		return false
	}
	if r.ephemeralStorage > 0 && r.ephemeralStorage > alloc.ephemeralStorage-requested.ephemeralStorage-extra.ephemeralStorage {
		return false
	}
	if len(r.scalar) == 0 {
		// Most pods: starting a range over a map costs more than this check.
		return true
	}
	for name, v := range r.scalar {
		if v > 0 && v > alloc.scalar[name]-requested.scalar[name]-extra.scalar[name] {
			return false
		}
	}
	return true
}

// The requests the scheduler's scoring assumes for a container that names
// none: 100 millicores and 200 MiB (non-zero requests), so that pods
// without requests still spread.
const (
	defaultMilliCPURequest int64 = 100
	defaultMemoryRequest   int64 = 200 * 1024 * 1024
)

// nonZeroRequests are the CPU and memory NodeResourcesFit's scoring charges
// for a pod: its requests with the defaults for a container that names
// none (an explicit zero stays zero), plus overhead; with pod-level
// requests, the defaults stand in only for what the pod level leaves out.
func nonZeroRequests(pod *corev1.Pod) (milliCPU, memory int64) {
	spec := &pod.Spec
	if len(spec.InitContainers) == 0 && spec.Overhead == nil && spec.Resources == nil && !resizing(pod) {
		for i := range spec.Containers {
			reqs := spec.Containers[i].Resources.Requests
			if q, ok := reqs[corev1.ResourceCPU]; ok {
				milliCPU += q.MilliValue()
			} else {
				milliCPU += defaultMilliCPURequest
			}
			if q, ok := reqs[corev1.ResourceMemory]; ok {
				memory += q.Value()
			} else {
				memory += defaultMemoryRequest
			}
		}
		return milliCPU, memory
	}
	opts := resourcehelper.PodResourcesOptions{UseStatusResources: resizing(pod)}
	requests := resourcehelper.PodRequests(pod, opts)
	opts.NonMissingContainerRequests = corev1.ResourceList{}
	podLevel := resourcehelper.IsPodLevelRequestsSet(pod)
	if _, ok := requests[corev1.ResourceCPU]; !ok || !podLevel {
		opts.NonMissingContainerRequests[corev1.ResourceCPU] = *resource.NewMilliQuantity(defaultMilliCPURequest, resource.DecimalSI)
	}
	if _, ok := requests[corev1.ResourceMemory]; !ok || !podLevel {
		opts.NonMissingContainerRequests[corev1.ResourceMemory] = *resource.NewQuantity(defaultMemoryRequest, resource.BinarySI)
	}
	if len(opts.NonMissingContainerRequests) > 0 {
		requests = resourcehelper.PodRequests(pod, opts)
	}
	return requests.Cpu().MilliValue(), requests.Memory().Value()
}

// fitScoreRequests are the pod's requests as kube-scheduler 1.37's
// NodeResourcesFit scores them: the containers' with the non-zero
// defaults, and overhead; its scorer is built without the pod-level
// resources and in-place resize gates, so it reads neither the pod's
// pod-level requests nor a resize's status (BalancedAllocation reads
// both, as the fit filter does).
func fitScoreRequests(pod *corev1.Pod) resources {
	return resourcesFrom(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{
		SkipPodLevelResources: true,
		NonMissingContainerRequests: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(defaultMilliCPURequest, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(defaultMemoryRequest, resource.BinarySI),
		},
	}))
}
