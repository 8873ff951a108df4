package placement

import (
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The snapshot's storage objects besides volumes and claims: CSINodes and
// VolumeAttachments, indexed by node, as NodeVolumeLimits reads them, and
// CSIDrivers and CSIStorageCapacities, as VolumeBinding's capacity check
// reads them.

// attachmentIndex holds the VolumeAttachments by node, then by name, and
// the node of each, so that an event finds its attachment without a scan.
type attachmentIndex struct {
	byNode map[string]map[string]*storagev1.VolumeAttachment
	nodeOf map[string]string
}

func newAttachmentIndex() attachmentIndex {
	return attachmentIndex{byNode: map[string]map[string]*storagev1.VolumeAttachment{}, nodeOf: map[string]string{}}
}

// UpsertCSINode adds or replaces a node's CSINode.
func (s *Snapshot) UpsertCSINode(cn *storagev1.CSINode) { s.csiNodes[cn.Name] = cn }

// DeleteCSINode removes a node's CSINode.
func (s *Snapshot) DeleteCSINode(name string) { delete(s.csiNodes, name) }

// UpsertVolumeAttachment adds or replaces a VolumeAttachment.
func (s *Snapshot) UpsertVolumeAttachment(va *storagev1.VolumeAttachment) {
	s.DeleteVolumeAttachment(va.Name)
	byName, ok := s.attachments.byNode[va.Spec.NodeName]
	if !ok {
		byName = map[string]*storagev1.VolumeAttachment{}
		s.attachments.byNode[va.Spec.NodeName] = byName
	}
	byName[va.Name] = va
	s.attachments.nodeOf[va.Name] = va.Spec.NodeName
}

// DeleteVolumeAttachment removes a VolumeAttachment.
func (s *Snapshot) DeleteVolumeAttachment(name string) {
	node, ok := s.attachments.nodeOf[name]
	if !ok {
		return
	}
	delete(s.attachments.nodeOf, name)
	delete(s.attachments.byNode[node], name)
	if len(s.attachments.byNode[node]) == 0 {
		delete(s.attachments.byNode, node)
	}
}

// UpsertCSIDriver adds or replaces a CSIDriver.
func (s *Snapshot) UpsertCSIDriver(d *storagev1.CSIDriver) { s.csiDrivers[d.Name] = d }

// DeleteCSIDriver removes a CSIDriver.
func (s *Snapshot) DeleteCSIDriver(name string) { delete(s.csiDrivers, name) }

// UpsertStorageCapacity adds or replaces a CSIStorageCapacity.
func (s *Snapshot) UpsertStorageCapacity(c *storagev1.CSIStorageCapacity) {
	s.capacities[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}] = c
}

// DeleteStorageCapacity removes a CSIStorageCapacity.
func (s *Snapshot) DeleteStorageCapacity(namespace, name string) {
	delete(s.capacities, types.NamespacedName{Namespace: namespace, Name: name})
}
