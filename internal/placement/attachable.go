package placement

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	csitrans "k8s.io/csi-translation-lib"
	csiplugins "k8s.io/csi-translation-lib/plugins"
	"k8s.io/klog/v2"
)

// unboundHandlePrefix stands for the random prefix the scheduler gives the
// volume handle of a claim not bound yet: any fixed prefix makes one claim
// one volume, which is all the count needs.
const unboundHandlePrefix = "unbound"

var translator = csitrans.New()

// migratedPlugins are the in-tree plugins whose volumes the scheduler counts
// as their CSI driver's on a node that has a CSINode: those whose migration
// is on by default in every supported release.
var migratedPlugins = map[string]bool{
	csiplugins.AWSEBSInTreePluginName:    true,
	csiplugins.GCEPDInTreePluginName:     true,
	csiplugins.AzureDiskInTreePluginName: true,
	csiplugins.CinderInTreePluginName:    true,
	csiplugins.PortworxVolumePluginName:  true,
}

// countsAgainstVolumeLimits is an inline in-tree disk that NodeVolumeLimits
// counts as its CSI driver's volume.
func countsAgainstVolumeLimits(v *corev1.Volume) bool {
	if !translator.IsInlineMigratable(v) {
		return false
	}
	plugin, err := translator.GetInTreePluginNameFromSpec(nil, v)
	return err == nil && migratedPlugins[plugin]
}

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

// attachableVolumes adds to into the CSI volumes pod attaches, by unique
// name (driver/handle) with their driver, as NodeVolumeLimits counts them on
// a node that has a CSINode. A claim that does not exist is skipped: for the
// incoming pod VolumeBinding's PreFilter has refused it already, and the
// scheduler skips it for the pods on a node.
func (s *Snapshot) attachableVolumes(pod *corev1.Pod, into map[string]string) {
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		var claimName string
		switch {
		case v.PersistentVolumeClaim != nil:
			claimName = v.PersistentVolumeClaim.ClaimName
		case v.Ephemeral != nil:
			claimName = pod.Name + "-" + v.Name
		default:
			addInlineVolume(v, pod.Namespace, into)
			continue
		}
		claim, ok := s.claims[types.NamespacedName{Namespace: pod.Namespace, Name: claimName}]
		if !ok {
			continue
		}
		if driver, handle := s.csiVolumeOf(claim); driver != "" && handle != "" {
			into[driver+"/"+handle] = driver
		}
	}
}

func addInlineVolume(v *corev1.Volume, namespace string, into map[string]string) {
	if !countsAgainstVolumeLimits(v) {
		return
	}
	pv, err := translator.TranslateInTreeInlineVolumeToCSI(klog.Background(), v, namespace)
	if err != nil || pv == nil || pv.Spec.CSI == nil {
		return
	}
	into[pv.Spec.CSI.Driver+"/"+pv.Spec.CSI.VolumeHandle] = pv.Spec.CSI.Driver
}

// csiVolumeOf is the CSI driver and volume handle of a claim: its bound
// volume's (translated from an in-tree source when that migrated), or, for a
// claim not bound yet, its class's provisioner and a handle of its own.
func (s *Snapshot) csiVolumeOf(claim *corev1.PersistentVolumeClaim) (driver, handle string) {
	pv, ok := s.volumes[claim.Spec.VolumeName]
	if claim.Spec.VolumeName == "" || !ok {
		return s.provisionedVolumeOf(claim)
	}
	if pv.Spec.CSI != nil {
		return pv.Spec.CSI.Driver, pv.Spec.CSI.VolumeHandle
	}
	if !translator.IsPVMigratable(pv) {
		return "", ""
	}
	plugin, err := translator.GetInTreePluginNameFromSpec(pv, nil)
	if err != nil || !migratedPlugins[plugin] {
		return "", ""
	}
	csiPV, err := translator.TranslateInTreePVToCSI(klog.Background(), pv)
	if err != nil || csiPV.Spec.CSI == nil {
		return "", ""
	}
	return csiPV.Spec.CSI.Driver, csiPV.Spec.CSI.VolumeHandle
}

func (s *Snapshot) provisionedVolumeOf(claim *corev1.PersistentVolumeClaim) (driver, handle string) {
	class, ok := s.storageClasses[storagehelpers.GetPersistentVolumeClaimClass(claim)]
	if !ok {
		return "", ""
	}
	handle = unboundHandlePrefix + "-" + claim.Namespace + "/" + claim.Name
	if !translator.IsMigratableIntreePluginByName(class.Provisioner) {
		return class.Provisioner, handle
	}
	if !migratedPlugins[class.Provisioner] {
		return "", ""
	}
	driver, err := translator.GetCSINameFromInTreeName(class.Provisioner)
	if err != nil {
		return "", ""
	}
	return driver, handle
}
