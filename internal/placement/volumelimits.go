package placement

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	csitrans "k8s.io/csi-translation-lib"
	csiplugins "k8s.io/csi-translation-lib/plugins"
	"k8s.io/klog/v2"
)

// ReasonMaxVolumeCount is NodeVolumeLimits' Filter reason, word for word:
// the node's CSINode caps how many volumes of a driver it attaches, and the
// pod's new volumes would go past it.
const ReasonMaxVolumeCount = "node(s) exceed max volume count"

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

// attachmentIndex holds the VolumeAttachments by node, then by name.
type attachmentIndex map[string]map[string]*storagev1.VolumeAttachment

// UpsertCSINode adds or replaces a node's CSINode.
func (s *Snapshot) UpsertCSINode(cn *storagev1.CSINode) { s.csiNodes[cn.Name] = cn }

// DeleteCSINode removes a node's CSINode.
func (s *Snapshot) DeleteCSINode(name string) { delete(s.csiNodes, name) }

// UpsertVolumeAttachment adds or replaces a VolumeAttachment.
func (s *Snapshot) UpsertVolumeAttachment(va *storagev1.VolumeAttachment) {
	s.DeleteVolumeAttachment(va.Name)
	byName, ok := s.attachments[va.Spec.NodeName]
	if !ok {
		byName = map[string]*storagev1.VolumeAttachment{}
		s.attachments[va.Spec.NodeName] = byName
	}
	byName[va.Name] = va
}

// DeleteVolumeAttachment removes a VolumeAttachment.
func (s *Snapshot) DeleteVolumeAttachment(name string) {
	for node, byName := range s.attachments {
		if _, ok := byName[name]; ok {
			delete(byName, name)
			if len(byName) == 0 {
				delete(s.attachments, node)
			}
			return
		}
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
		claim, ok := s.claims[pod.Namespace+"/"+claimName]
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
		nv.account(s, s.pods[pid].pod, 1)
	}
	for _, va := range s.attachments[ni.node.Name] {
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
