package placement

import (
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// The annotations VolumeBinding reads on a claim.
const (
	// annBindCompleted marks a claim whose binding the PV controller
	// finished; a claim that names a volume without it is "pre-bound".
	annBindCompleted = "pv.kubernetes.io/bind-completed"
	// annSelectedNode names the node a WaitForFirstConsumer claim is being
	// provisioned for.
	annSelectedNode = "volume.kubernetes.io/selected-node"
	// noProvisioner is the provisioner of static (local) volumes: such a
	// class provisions nothing, so a claim binds to an existing PV or not at all.
	noProvisioner = "kubernetes.io/no-provisioner"
)

// claimRef is one PersistentVolumeClaim a pod mounts; an ephemeral one is
// created for the pod by the ephemeral volume controller.
type claimRef struct {
	types.NamespacedName
	ephemeral bool
}

func podClaims(pod *corev1.Pod) []claimRef {
	var refs []claimRef
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			refs = append(refs, claimRef{NamespacedName: types.NamespacedName{Namespace: pod.Namespace, Name: v.PersistentVolumeClaim.ClaimName}})
		case v.Ephemeral != nil:
			// A generic ephemeral volume's claim is named after the pod.
			refs = append(refs, claimRef{NamespacedName: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name + "-" + v.Name}, ephemeral: true})
		}
	}
	return refs
}

// podVolumes is what VolumeBinding's PreFilter finds for a pod: the volumes
// its bound claims name, the names of those that do not exist, and the
// WaitForFirstConsumer claims still to be bound, which each node must be
// able to satisfy.
type podVolumes struct {
	bound   []*corev1.PersistentVolume
	missing []string
	delayed []delayedClaim
	// storage answers whether a class has room for a claim on a node.
	storage *storageCapacity
}

// none reports whether the pod has nothing to bind and no volume to
// follow, as most pods: no node fails VolumeBinding or VolumeZone.
func (pv podVolumes) none() bool {
	return len(pv.bound) == 0 && len(pv.delayed) == 0 && len(pv.missing) == 0
}

// delayedClaim is an unbound WaitForFirstConsumer claim, with its class and
// the volumes of that class it might bind to.
type delayedClaim struct {
	claim      *corev1.PersistentVolumeClaim
	class      *storagev1.StorageClass
	candidates []*corev1.PersistentVolume
}

// volumePreFilter is VolumeBinding's PreFilter: a claim that does not exist
// or is being deleted, or an Immediate claim not yet fully bound (a claim
// that names a volume without the bind-completed annotation counts as
// one), makes the pod unschedulable everywhere. It returns the pod's
// volumes for the per-node checks.
func (s *Snapshot) volumePreFilter(pod *corev1.Pod) (podVolumes, string) {
	pv := podVolumes{storage: &storageCapacity{drivers: s.csiDrivers, capacities: s.capacities}}
	unboundImmediate := false
	for _, ref := range podClaims(pod) {
		claim, ok := s.claims[ref.NamespacedName]
		switch {
		case !ok && ref.ephemeral && isSimulated(pod):
			// A pod the rollout would create gets its ephemeral claim from
			// the ephemeral volume controller once it exists; until then
			// the scheduler waits, so the claim does not decide where it goes.
			continue
		case !ok && ref.ephemeral:
			return pv, fmt.Sprintf("waiting for ephemeral volume controller to create the persistentvolumeclaim %q", ref.Name)
		case !ok:
			return pv, fmt.Sprintf("persistentvolumeclaim %q not found", ref.Name)
		case claim.Status.Phase == corev1.ClaimLost:
			return pv, fmt.Sprintf("persistentvolumeclaim %q bound to non-existent persistentvolume %q", claim.Name, claim.Spec.VolumeName)
		}
		if claim.DeletionTimestamp != nil {
			return pv, fmt.Sprintf("persistentvolumeclaim %q is being deleted", ref.Name)
		}
		switch {
		case claim.Spec.VolumeName != "" && metav1.HasAnnotation(claim.ObjectMeta, annBindCompleted):
			volume, ok := s.volumes[claim.Spec.VolumeName]
			if !ok {
				pv.missing = append(pv.missing, claim.Spec.VolumeName)
				continue
			}
			pv.bound = append(pv.bound, volume)
		case claim.Spec.VolumeName == "" && s.delayedBinding(claim):
			// WaitForFirstConsumer: the volume follows the pod, as far as
			// some node can bind or provision it.
			class := s.storageClasses[storagehelpers.GetPersistentVolumeClaimClass(claim)]
			pv.delayed = append(pv.delayed, delayedClaim{claim: claim, class: class, candidates: s.volumesOfClass(class.Name)})
		default:
			unboundImmediate = true
		}
	}
	if unboundImmediate {
		return pv, "pod has unbound immediate PersistentVolumeClaims"
	}
	return pv, ""
}

func (s *Snapshot) delayedBinding(claim *corev1.PersistentVolumeClaim) bool {
	sc, ok := s.storageClasses[storagehelpers.GetPersistentVolumeClaimClass(claim)]
	if !ok || sc.VolumeBindingMode == nil {
		return false
	}
	return *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
}

func (s *Snapshot) volumesOfClass(class string) []*corev1.PersistentVolume {
	var out []*corev1.PersistentVolume
	for _, v := range s.volumes {
		if storagehelpers.GetPersistentVolumeClass(v) == class {
			out = append(out, v)
		}
	}
	return out
}

// volumeFilter is VolumeBinding's and VolumeZone's per-node check of the
// pod's volumes: bound volumes' node affinity must admit the node, each
// WaitForFirstConsumer claim must find a volume there or be provisionable
// there, and the bound volumes' zone labels must match the node's.
// VolumeBinding judges the bound and the unbound claims both and reports
// a reason for each that fails: then is the second, "" when there is
// none. VolumeZone is asked only when VolumeBinding admits the node.
func volumeFilter(p *Profile, pv podVolumes, node *corev1.Node) (first, then string) {
	if pv.none() {
		return "", ""
	}
	if !p.filters(FilterVolumeBinding) {
		if p.filters(FilterVolumeZone) && !volumeZonesMatch(pv.bound, node) {
			return ReasonVolumeZone, ""
		}
		return "", ""
	}
	if len(pv.missing) > 0 {
		return ReasonVolumeMissing, ""
	}
	for _, v := range pv.bound {
		if v.Spec.NodeAffinity != nil && v.Spec.NodeAffinity.Required != nil {
			if ok, _ := nodeaffinity.NewLazyErrorNodeSelector(v.Spec.NodeAffinity.Required).Match(node); !ok {
				first = ReasonVolumeNodeAffinity
				break
			}
		}
	}
	if reason := delayedClaimsSatisfied(pv.delayed, pv.storage, node); reason != "" {
		if first == "" {
			return reason, ""
		}
		return first, reason
	}
	if first != "" {
		return first, ""
	}
	if p.filters(FilterVolumeZone) && !volumeZonesMatch(pv.bound, node) {
		return ReasonVolumeZone, ""
	}
	return "", ""
}

// delayedClaimsSatisfied is VolumeBinding's check of the claims it would
// bind on this node, in its order: a claim being provisioned for another
// node rules the node out first; the others, smallest request first, take
// the smallest matching available volume (each volume once); then the
// claims to provision, those being provisioned here first, each in turn
// until one cannot be: a class of static volumes cannot provision, one
// whose allowedTopologies exclude the node may not (both "didn't find
// available persistent volumes to bind"), and a CSI driver that reports
// storage capacity must report enough for the claim on a topology that
// holds the node ("did not have enough free storage").
func delayedClaimsSatisfied(claims []delayedClaim, storage *storageCapacity, node *corev1.Node) string {
	_, reason := planDelayedClaims(claims, storage, node)
	return reason
}

// delayedPlan is how VolumeBinding would bind a pod's delayed claims on a
// node: the available volumes it matched (static), and the claims it would
// provision with the storage capacity object that has room for each (nil
// where the driver reports none).
type delayedPlan struct {
	static  []staticBinding
	dynamic []dynamicProvision
}

type staticBinding struct {
	claim  *corev1.PersistentVolumeClaim
	volume *corev1.PersistentVolume
}

type dynamicProvision struct {
	claim    *corev1.PersistentVolumeClaim
	class    *storagev1.StorageClass
	capacity *storagev1.CSIStorageCapacity
}

// planDelayedClaims is delayedClaimsSatisfied with the plan that satisfies
// the claims, for VolumeBinding's score.
func planDelayedClaims(claims []delayedClaim, storage *storageCapacity, node *corev1.Node) (delayedPlan, string) {
	var plan delayedPlan
	var provision, match []delayedClaim
	for _, dc := range claims {
		selected, ok := dc.claim.Annotations[annSelectedNode]
		switch {
		case ok && selected != node.Name:
			return plan, ReasonVolumeBindConflict
		case ok:
			provision = append(provision, dc)
		default:
			match = append(match, dc)
		}
	}
	sort.Sort(bySize(match))
	chosen := map[string]*corev1.PersistentVolume{}
	for _, dc := range match {
		found, err := storagehelpers.FindMatchingVolume(dc.claim, dc.candidates, node, chosen, true, true)
		if err != nil {
			return plan, ReasonVolumeBindConflict
		}
		if found != nil {
			chosen[found.Name] = found
			plan.static = append(plan.static, staticBinding{claim: dc.claim, volume: found})
			continue
		}
		provision = append(provision, dc)
	}
	for _, dc := range provision {
		if !provisionable(dc.class, node) {
			return plan, ReasonVolumeBindConflict
		}
		enough, capacity := storage.enough(dc.class, dc.claim, node)
		if !enough {
			return plan, ReasonNotEnoughSpace
		}
		plan.dynamic = append(plan.dynamic, dynamicProvision{claim: dc.claim, class: dc.class, capacity: capacity})
	}
	return plan, ""
}

// bySize orders claims by the storage they request, as VolumeBinding sorts
// them before matching volumes (with sort.Sort, so that claims of equal
// size end in the same order).
type bySize []delayedClaim

func (a bySize) Len() int      { return len(a) }
func (a bySize) Swap(i, j int) { a[i], a[j] = a[j], a[i] }
func (a bySize) Less(i, j int) bool {
	x := a[i].claim.Spec.Resources.Requests[corev1.ResourceStorage]
	y := a[j].claim.Spec.Resources.Requests[corev1.ResourceStorage]
	return x.Cmp(y) == -1
}

// provisionable reports whether a class can provision a volume for a pod on
// the node: it has a provisioner, and its allowedTopologies admit the node.
func provisionable(class *storagev1.StorageClass, node *corev1.Node) bool {
	if class.Provisioner == "" || class.Provisioner == noProvisioner {
		return false
	}
	return topologyAllows(class.AllowedTopologies, node.Labels)
}

// topologyAllows is the scheduler's matching of a class's allowedTopologies:
// any term matches when all its expressions do; no terms allow every node.
func topologyAllows(terms []corev1.TopologySelectorTerm, nodeLabels map[string]string) bool {
	if len(terms) == 0 {
		return true
	}
	for _, term := range terms {
		if termMatches(term, nodeLabels) {
			return true
		}
	}
	return false
}

func termMatches(term corev1.TopologySelectorTerm, nodeLabels map[string]string) bool {
	for _, req := range term.MatchLabelExpressions {
		value, ok := nodeLabels[req.Key]
		if !ok || !slices.Contains(req.Values, value) {
			return false
		}
	}
	return true
}
