package placement

import (
	corev1 "k8s.io/api/core/v1"
)

// ReasonMaxVolumeCount is NodeVolumeLimits' Filter reason, word for word:
// the node's CSINode caps how many volumes of a driver it attaches, and the
// pod's new volumes would go past it.
const ReasonMaxVolumeCount = "node(s) exceed max volume count"

// volumeLimits is NodeVolumeLimits' state for one evaluated pod: the
// volumes it would attach and, per evaluated position whose CSINode limits
// one of their drivers, what is attached there. Nil when the pod attaches
// nothing, so that the common pod pays nothing.
type volumeLimits struct {
	newVolumes map[string]string
	nodes      []*nodeVolumes
}

// nodeVolumes is what is attached to one node, for the drivers the evaluated
// pod uses: the pods using each volume, the volumes a VolumeAttachment holds
// there, and, per driver, the distinct volumes of either kind.
type nodeVolumes struct {
	limits   map[string]int64
	podUsers map[string]int32
	attached map[string]bool
	distinct map[string]int32
	scratch  map[string]string
}

func (e *evaluator) initVolumeLimits() {
	newVolumes := map[string]string{}
	e.s.attachableVolumes(e.pod, newVolumes)
	if len(newVolumes) == 0 {
		return
	}
	vl := &volumeLimits{newVolumes: newVolumes, nodes: make([]*nodeVolumes, len(e.order))}
	for i, id := range e.order {
		vl.nodes[i] = e.s.nodeVolumes(e.s.nodes[id], newVolumes)
	}
	e.volumeLimits = vl
}

// nodeVolumes is what is attached to the node, or nil when its CSINode
// limits none of the drivers of newVolumes (or it has no CSINode).
func (s *Snapshot) nodeVolumes(ni *nodeInfo, newVolumes map[string]string) *nodeVolumes {
	cn, ok := s.csiNodes[ni.node.Name]
	if !ok {
		return nil
	}
	used := map[string]bool{}
	for _, driver := range newVolumes {
		used[driver] = true
	}
	limits := map[string]int64{}
	for _, d := range cn.Spec.Drivers {
		if used[d.Name] && d.Allocatable != nil && d.Allocatable.Count != nil {
			limits[d.Name] = int64(*d.Allocatable.Count)
		}
	}
	if len(limits) == 0 {
		return nil
	}
	nv := &nodeVolumes{limits: limits, podUsers: map[string]int32{}, attached: map[string]bool{}, distinct: map[string]int32{}, scratch: map[string]string{}}
	for pid := range ni.pods {
		nv.account(s, s.pods[pid].common(), 1)
	}
	for _, va := range s.attachments.byNode[ni.node.Name] {
		pvName := va.Spec.Source.PersistentVolumeName
		if va.Spec.Attacher == "" || pvName == nil {
			continue
		}
		if pv, ok := s.volumes[*pvName]; ok && pv.Spec.CSI != nil {
			nv.attach(va.Spec.Attacher+"/"+pv.Spec.CSI.VolumeHandle, va.Spec.Attacher)
		}
	}
	return nv
}

// held is whether a pod or a VolumeAttachment holds the volume on the node.
func (nv *nodeVolumes) held(unique string) bool {
	return nv.podUsers[unique] > 0 || nv.attached[unique]
}

func (nv *nodeVolumes) attach(unique, driver string) {
	if !nv.held(unique) {
		nv.distinct[driver]++
	}
	nv.attached[unique] = true
}

// account counts p's volumes as it lands on (delta 1) or leaves (-1) the node.
func (nv *nodeVolumes) account(s *Snapshot, p *corev1.Pod, delta int32) {
	clear(nv.scratch)
	s.attachableVolumes(p, nv.scratch)
	for unique, driver := range nv.scratch {
		was := nv.held(unique)
		nv.podUsers[unique] += delta
		if now := nv.held(unique); now != was {
			if now {
				nv.distinct[driver]++
			} else {
				nv.distinct[driver]--
			}
		}
	}
}

// exceeded is NodeVolumeLimits' check at position i: the pod's volumes that
// no pod on the node uses yet (a VolumeAttachment alone does not make a
// volume shared, as in the scheduler), per driver, on top of the distinct
// volumes attached there, against the driver's limit.
func (vl *volumeLimits) exceeded(i int) bool {
	nv := vl.nodes[i]
	if nv == nil {
		return false
	}
	added := map[string]int64{}
	for unique, driver := range vl.newVolumes {
		if nv.podUsers[unique] <= 0 {
			added[driver]++
		}
	}
	for driver, n := range added {
		if limit, ok := nv.limits[driver]; ok && int64(nv.distinct[driver])+n > limit {
			return true
		}
	}
	return false
}

// attachLimitReached is NodeVolumeLimits refusing a pod with newVolumes on
// the node as it is.
func (s *Snapshot) attachLimitReached(ni *nodeInfo, newVolumes map[string]string) bool {
	if len(newVolumes) == 0 {
		return false
	}
	vl := volumeLimits{newVolumes: newVolumes, nodes: []*nodeVolumes{s.nodeVolumes(ni, newVolumes)}}
	return vl.exceeded(0)
}

func (e *evaluator) volumeLimitExceeded(i int) bool {
	return e.volumeLimits != nil && e.volumeLimits.exceeded(i)
}

func (e *evaluator) accountVolumeLimits(p *corev1.Pod, i int, delta int32) {
	if e.volumeLimits == nil {
		return
	}
	if nv := e.volumeLimits.nodes[i]; nv != nil {
		nv.account(e.s, p, delta)
	}
}
