package placement

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
)

// unboundHandlePrefix stands for the random prefix the scheduler gives the
// volume handle of a claim not bound yet: any fixed prefix makes one claim
// one volume, which is all the count needs.
const unboundHandlePrefix = "unbound"

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
