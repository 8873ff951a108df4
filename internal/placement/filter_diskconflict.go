package placement

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// ReasonDiskConflict is VolumeRestrictions' Filter reason, word for word:
// an in-tree disk written inline in the pod is already mounted, read-write,
// by a pod on the node.
const ReasonDiskConflict = "node(s) had no available disk"

// disksConflict is VolumeRestrictions' conflict between the disk v and the
// inline volumes of another pod: the same GCE PD or iSCSI target unless both
// mount it read-only, the same EBS volume, the same RBD image on overlapping
// monitors unless both are read-only.
func disksConflict(v *corev1.Volume, other *corev1.Pod) bool {
	for i := range other.Spec.Volumes {
		o := &other.Spec.Volumes[i]
		switch {
		case v.GCEPersistentDisk != nil && o.GCEPersistentDisk != nil:
			if v.GCEPersistentDisk.PDName == o.GCEPersistentDisk.PDName && !(v.GCEPersistentDisk.ReadOnly && o.GCEPersistentDisk.ReadOnly) {
				return true
			}
		case v.AWSElasticBlockStore != nil && o.AWSElasticBlockStore != nil:
			if v.AWSElasticBlockStore.VolumeID == o.AWSElasticBlockStore.VolumeID {
				return true
			}
		case v.ISCSI != nil && o.ISCSI != nil:
			if v.ISCSI.IQN == o.ISCSI.IQN && !(v.ISCSI.ReadOnly && o.ISCSI.ReadOnly) {
				return true
			}
		case v.RBD != nil && o.RBD != nil:
			if v.RBD.RBDPool == o.RBD.RBDPool && v.RBD.RBDImage == o.RBD.RBDImage && !(v.RBD.ReadOnly && o.RBD.ReadOnly) &&
				slices.ContainsFunc(v.RBD.CephMonitors, func(m string) bool { return slices.Contains(o.RBD.CephMonitors, m) }) {
				return true
			}
		}
	}
	return false
}

// initDiskConflicts counts, per position, the pods whose inline disks
// conflict with the pod's; only for a pod that has such a disk.
func (e *evaluator) initDiskConflicts() {
	for i := range e.pod.Spec.Volumes {
		if restrictedDisk(&e.pod.Spec.Volumes[i]) {
			e.disks = append(e.disks, &e.pod.Spec.Volumes[i])
		}
	}
	if len(e.disks) == 0 {
		return
	}
	e.diskHolders = make([]int32, len(e.order))
	for i, id := range e.order {
		for pid := range e.s.nodes[id].pods {
			e.accountDisks(e.s.pods[pid].common(), i, 1)
		}
	}
}

// accountDisks counts p as a holder of a conflicting disk as it lands on
// (delta 1) or leaves (-1) the node at position i.
func (e *evaluator) accountDisks(p *corev1.Pod, i int, delta int32) {
	if e.diskHolders == nil {
		return
	}
	for _, v := range e.disks {
		if disksConflict(v, p) {
			e.diskHolders[i] += delta
			return
		}
	}
}

func (e *evaluator) diskConflict(i int) bool {
	return e.diskHolders != nil && e.diskHolders[i] > 0
}
