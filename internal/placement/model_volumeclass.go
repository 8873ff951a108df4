package placement

import (
	corev1 "k8s.io/api/core/v1"
	csitrans "k8s.io/csi-translation-lib"
	csiplugins "k8s.io/csi-translation-lib/plugins"
)

// The classes of volume the filters count apart, read from the volume
// alone: the inline in-tree disks NodeVolumeLimits counts as their CSI
// driver's, and the disks VolumeRestrictions keeps to one pod.

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

// restrictedDisk is an inline in-tree disk that VolumeRestrictions keeps to
// one writer per node.
func restrictedDisk(v *corev1.Volume) bool {
	return v.GCEPersistentDisk != nil || v.AWSElasticBlockStore != nil || v.RBD != nil || v.ISCSI != nil
}
