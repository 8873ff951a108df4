package placement

import (
	"math"

	corev1 "k8s.io/api/core/v1"
)

// resourceScore is NodeResourcesFit's score (useRequested false: what
// pods request with the non-zero defaults) or
// NodeResourcesBalancedAllocation's (useRequested true: what they
// request), over the resources the profile names.
type resourceScore struct {
	sc           *scorer
	resources    []ResourceWeight
	useRequested bool
	// podRequests are the incoming pod's requests of each resource.
	podRequests []int64
	combine     func(requested, allocated, allocatable []int64) int64
	// buffers, reused for each node.
	requested, allocated, allocatable []int64
}

func newFitScore(sc *scorer, fit FitScoring) *resourceScore {
	r := newResourceScore(sc, fit.Resources, false)
	switch fit.Type {
	case MostAllocated:
		r.combine = weightedPerResource(fit.Resources, mostRequested)
	case RequestedToCapacityRatio:
		r.combine = requestedToCapacityRatio(fit.Resources, fit.Shape)
	default:
		r.combine = weightedPerResource(fit.Resources, leastRequested)
	}
	return r
}

// newBalancedScore is nil when the pod requests none of the resources:
// BalancedAllocation skips a best-effort pod.
func newBalancedScore(sc *scorer, resources []ResourceWeight) *resourceScore {
	r := newResourceScore(sc, resources, true)
	for _, v := range r.podRequests {
		if v != 0 {
			r.combine = balanced
			return r
		}
	}
	return nil
}

func newResourceScore(sc *scorer, resources []ResourceWeight, useRequested bool) *resourceScore {
	n := len(resources)
	r := &resourceScore{sc: sc, resources: resources, useRequested: useRequested, podRequests: make([]int64, n),
		requested: make([]int64, n), allocated: make([]int64, n), allocatable: make([]int64, n)}
	for k, res := range resources {
		r.podRequests[k] = sc.podRequest(res.Name, useRequested)
	}
	return r
}

func (r *resourceScore) score(i int) int64 {
	ni := r.sc.e.s.nodes[r.sc.e.order[i]]
	extra, _ := r.sc.e.extras.get(i)
	for k, res := range r.resources {
		r.requested[k], r.allocated[k], r.allocatable[k] = 0, 0, 0
		if r.podRequests[k] == 0 && isScalarScored(res.Name) {
			continue
		}
		alloc, used := r.nodeResource(ni, extra, i, res.Name)
		if alloc == 0 {
			continue
		}
		r.allocatable[k], r.allocated[k], r.requested[k] = alloc, used, used+r.podRequests[k]
	}
	return r.combine(r.requested, r.allocated, r.allocatable)
}

// nodeResource is a node's allocatable of a resource and what its pods
// (and the simulation's) use of it, as the scorer counts them.
func (r *resourceScore) nodeResource(ni *nodeInfo, extra resources, i int, name corev1.ResourceName) (alloc, used int64) {
	switch name {
	case corev1.ResourceCPU:
		if r.useRequested {
			return ni.allocatable.milliCPU, ni.requested.milliCPU + extra.milliCPU
		}
		return ni.allocatable.milliCPU, ni.nonZeroCPU + r.sc.extraNonZeroAt(i).cpu
	case corev1.ResourceMemory:
		if r.useRequested {
			return ni.allocatable.memory, ni.requested.memory + extra.memory
		}
		return ni.allocatable.memory, ni.nonZeroMemory + r.sc.extraNonZeroAt(i).memory
	case corev1.ResourceEphemeralStorage:
		return ni.allocatable.ephemeralStorage, ni.requested.ephemeralStorage + extra.ephemeralStorage
	}
	alloc, ok := ni.allocatable.scalar[name]
	if !ok {
		return 0, 0
	}
	return alloc, ni.requested.scalar[name] + extra.scalar[name]
}

// isScalarScored reports whether the scorer skips a resource the pod does
// not request: any but cpu, memory, ephemeral storage and pods.
func isScalarScored(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, corev1.ResourcePods:
		return false
	}
	return true
}

// weightedPerResource combines a per-resource score by the resources'
// weights, skipping those the node does not have.
func weightedPerResource(resources []ResourceWeight, per func(requested, capacity int64) int64) func(requested, _, allocatable []int64) int64 {
	return func(requested, _, allocatable []int64) int64 {
		var score, weights int64
		for k := range requested {
			if allocatable[k] == 0 {
				continue
			}
			score += per(requested[k], allocatable[k]) * resources[k].Weight
			weights += resources[k].Weight
		}
		if weights == 0 {
			return 0
		}
		return score / weights
	}
}

func leastRequested(requested, capacity int64) int64 {
	if capacity == 0 || requested > capacity {
		return 0
	}
	return (capacity - requested) * maxNodeScore / capacity
}

func mostRequested(requested, capacity int64) int64 {
	if capacity == 0 {
		return 0
	}
	return min(requested, capacity) * maxNodeScore / capacity
}

// requestedToCapacityRatio scores utilization on the shape's broken line,
// the shape's scores (0 to 10) scaled to 0 to 100; a resource scoring 0
// carries no weight.
func requestedToCapacityRatio(resources []ResourceWeight, shape []ShapePoint) func(requested, _, allocatable []int64) int64 {
	line := utilizationLine(shape)
	return func(requested, _, allocatable []int64) int64 {
		var score, weights int64
		for k := range requested {
			if allocatable[k] == 0 {
				continue
			}
			var s int64
			if requested[k] > allocatable[k] {
				s = line(maxUtilization)
			} else {
				s = line(requested[k] * maxUtilization / allocatable[k])
			}
			if s > 0 {
				score += s * resources[k].Weight
				weights += resources[k].Weight
			}
		}
		if weights == 0 {
			return 0
		}
		return int64(math.Round(float64(score) / float64(weights)))
	}
}

// maxUtilization is the utilization, in percent, of a full resource.
const maxUtilization = 100

// utilizationLine is the broken line through a shape's points, its scores
// (0 to 10) scaled to 0 to 100: flat before the first point and after the
// last.
func utilizationLine(shape []ShapePoint) func(utilization int64) int64 {
	points := make([]ShapePoint, len(shape))
	for k, p := range shape {
		points[k] = ShapePoint{Utilization: p.Utilization, Score: p.Score * (maxNodeScore / 10)}
	}
	return func(u int64) int64 {
		for k := range points {
			if u <= points[k].Utilization {
				if k == 0 {
					return points[0].Score
				}
				a, b := points[k-1], points[k]
				return a.Score + (b.Score-a.Score)*(u-a.Utilization)/(b.Utilization-a.Utilization)
			}
		}
		return points[len(points)-1].Score
	}
}

// balanced is BalancedAllocation's score: half the range, moved by how
// much the pod evens the node's use of the resources out.
func balanced(requested, allocated, allocatable []int64) int64 {
	with, without := balance(requested, allocatable), balance(allocated, allocatable)
	return maxNodeScore/2 + (maxNodeScore/2+with-without)/2
}

// balance is 100 less the standard deviation of the used fractions (each
// at most 1) of the resources the node has, in percent.
func balance(used, allocatable []int64) int64 {
	var fractions [8]float64
	f := fractions[:0]
	var total float64
	for k := range used {
		if allocatable[k] == 0 {
			continue
		}
		x := min(float64(used[k])/float64(allocatable[k]), 1)
		total += x
		f = append(f, x)
	}
	std := 0.0
	switch {
	case len(f) == 2:
		std = math.Abs((f[0] - f[1]) / 2)
	case len(f) > 2:
		mean := total / float64(len(f))
		var sum float64
		for _, x := range f {
			sum += (x - mean) * (x - mean)
		}
		std = math.Sqrt(sum / float64(len(f)))
	}
	return int64((1 - std) * float64(maxNodeScore))
}

// extraNonZeroAt is the non-zero requests the simulation added at i.
func (sc *scorer) extraNonZeroAt(i int) nonZero {
	if !sc.e.extras.touchedAt(i) {
		return nonZero{}
	}
	return sc.touched[int32(i)].nonZero
}

// cpuMemoryOnly reports whether r weighs cpu and memory alone, with the
// strategy least or most allocated: resourceTotals scores it in one pass.
func (r *resourceScore) cpuMemoryOnly() bool {
	if r == nil || len(r.resources) != 2 || r.resources[0].Name != corev1.ResourceCPU || r.resources[1].Name != corev1.ResourceMemory {
		return false
	}
	return r.useRequested || r.sc.p.Fit.Type != RequestedToCapacityRatio
}

// resourceTotals adds NodeResourcesFit's and BalancedAllocation's
// weighted scores over cpu and memory to totals, as score computes them,
// without the per-resource slices.
func (sc *scorer) resourceTotals(positions []int, totals []int64) {
	fitW, balW := sc.p.weight(PluginNodeResourcesFit), sc.p.weight(PluginBalancedAllocation)
	cpuW, memW := sc.fit.resources[0].Weight, sc.fit.resources[1].Weight
	most := sc.p.Fit.Type == MostAllocated
	podCPU, podMem := sc.fit.podRequests[0], sc.fit.podRequests[1]
	reqCPU, reqMem := sc.balanced.podRequests[0], sc.balanced.podRequests[1]
	if sc.kept == nil {
		sc.kept = sc.e.s.loadMemo(loadKey{profile: sc.p, fitCPU: podCPU, fitMemory: podMem, requestedCPU: reqCPU, requestedMemory: reqMem})
	}
	for k, i := range positions {
		// A node the simulation left as it is scores what it scored
		// for an earlier question.
		touched := sc.e.extras.touchedAt(i)
		var t touchedNode
		if touched {
			if t = sc.touched[int32(i)]; t.scored {
				totals[k] += t.score
				continue
			}
		} else if v, ok := sc.kept.get(i); ok {
			totals[k] += v
			continue
		}
		var total int64
		ni := sc.e.s.nodes[sc.e.order[i]]
		allocCPU, allocMem := ni.allocatable.milliCPU, ni.allocatable.memory
		extra, _ := sc.e.extras.get(i)
		var score, weights int64
		if allocCPU != 0 {
			score += perResource(most, ni.nonZeroCPU+t.cpu+podCPU, allocCPU) * cpuW
			weights += cpuW
		}
		if allocMem != 0 {
			score += perResource(most, ni.nonZeroMemory+t.memory+podMem, allocMem) * memW
			weights += memW
		}
		if weights != 0 {
			total += score / weights * fitW
		}
		usedCPU, usedMem := ni.requested.milliCPU+extra.milliCPU, ni.requested.memory+extra.memory
		with := balance2(usedCPU+reqCPU, allocCPU, usedMem+reqMem, allocMem)
		without := balance2(usedCPU, allocCPU, usedMem, allocMem)
		total += (maxNodeScore/2 + (maxNodeScore/2+with-without)/2) * balW
		if touched {
			t.score, t.scored = total, true
			sc.touched[int32(i)] = t
		} else {
			sc.kept.put(i, total)
		}
		totals[k] += total
	}
}

func perResource(most bool, requested, capacity int64) int64 {
	if most {
		return mostRequested(requested, capacity)
	}
	return leastRequested(requested, capacity)
}

// balance2 is balance over cpu and memory.
func balance2(cpu, allocCPU, mem, allocMem int64) int64 {
	switch {
	case allocCPU == 0 && allocMem == 0:
		return maxNodeScore
	case allocCPU == 0 || allocMem == 0:
		// One fraction: no deviation.
		return maxNodeScore
	}
	f1 := min(float64(cpu)/float64(allocCPU), 1)
	f2 := min(float64(mem)/float64(allocMem), 1)
	return int64((1 - math.Abs((f1-f2)/2)) * float64(maxNodeScore))
}
