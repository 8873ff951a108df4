package placement

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// The scheduler's reasons, word for word, so that an answer reads like the
// FailedScheduling event a person already knows.
const (
	ReasonUnschedulable        = "node(s) were unschedulable"
	ReasonUntoleratedTaint     = "node(s) had untolerated taint(s)"
	ReasonNodeAffinity         = "node(s) didn't match Pod's node affinity/selector"
	ReasonVolumeNodeAffinity   = "node(s) didn't match PersistentVolume's node affinity"
	ReasonVolumeMissing        = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
	ReasonVolumeZone           = "node(s) had no available volume zone"
	ReasonSpread               = "node(s) didn't match pod topology spread constraints"
	ReasonSpreadMissingLabel   = ReasonSpread + " (missing required label)"
	ReasonAffinity             = "node(s) didn't match pod affinity rules"
	ReasonAntiAffinity         = "node(s) didn't match pod anti-affinity rules"
	ReasonExistingAntiAffinity = "node(s) didn't satisfy existing pods anti-affinity rules"
)

// doNotSchedule keeps the taints that filter: NoSchedule and NoExecute.
func doNotSchedule(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

// nodeFilter returns the reason the first of NodeUnschedulable,
// TaintToleration and NodeAffinity rejects the node for, "" if none does.
// None of them depends on other pods, so an evaluation computes it once.
func nodeFilter(pod *corev1.Pod, aff nodeaffinity.RequiredNodeAffinity, node *corev1.Node) string {
	logger := klog.Background()
	if node.Spec.Unschedulable && !corev1helpers.TolerationsTolerateTaint(logger, pod.Spec.Tolerations,
		&corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}, false) {
		return ReasonUnschedulable
	}
	if _, bad := corev1helpers.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, pod.Spec.Tolerations, doNotSchedule, false); bad {
		return ReasonUntoleratedTaint
	}
	// A selector that fails to parse matches no node, as in the scheduler.
	if ok, _ := aff.Match(node); !ok {
		return ReasonNodeAffinity
	}
	return ""
}

// toleratesAll reports whether the pod tolerates every NoSchedule and
// NoExecute taint of the node: nodeTaintsPolicy Honor counts only such nodes.
func toleratesAll(pod *corev1.Pod, node *corev1.Node) bool {
	_, bad := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations, doNotSchedule, false)
	return !bad
}

// claimRef is one PersistentVolumeClaim a pod mounts.
type claimRef struct{ namespace, name string }

func podClaims(pod *corev1.Pod) []claimRef {
	var refs []claimRef
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			refs = append(refs, claimRef{pod.Namespace, v.PersistentVolumeClaim.ClaimName})
		case v.Ephemeral != nil:
			// A generic ephemeral volume's claim is named after the pod.
			refs = append(refs, claimRef{pod.Namespace, pod.Name + "-" + v.Name})
		}
	}
	return refs
}

// volumePreFilter is VolumeBinding's PreFilter: a claim that does not exist,
// or an Immediate claim not yet bound, makes the pod unschedulable everywhere.
// It returns the pod's bound volumes for the per-node checks.
func (s *Snapshot) volumePreFilter(pod *corev1.Pod) ([]*corev1.PersistentVolume, []string, string) {
	var bound []*corev1.PersistentVolume
	var missing []string
	for _, ref := range podClaims(pod) {
		claim, ok := s.claims[ref.namespace+"/"+ref.name]
		if !ok {
			return nil, nil, fmt.Sprintf("persistentvolumeclaim %q not found", ref.name)
		}
		if claim.DeletionTimestamp != nil {
			return nil, nil, fmt.Sprintf("persistentvolumeclaim %q is being deleted", ref.name)
		}
		if claim.Spec.VolumeName == "" {
			if s.delayedBinding(claim) {
				// WaitForFirstConsumer: the volume follows the pod, it does
				// not pin it.
				continue
			}
			return nil, nil, "pod has unbound immediate PersistentVolumeClaims"
		}
		pv, ok := s.volumes[claim.Spec.VolumeName]
		if !ok {
			missing = append(missing, claim.Spec.VolumeName)
			continue
		}
		bound = append(bound, pv)
	}
	return bound, missing, ""
}

func (s *Snapshot) delayedBinding(claim *corev1.PersistentVolumeClaim) bool {
	name := ""
	if claim.Spec.StorageClassName != nil {
		name = *claim.Spec.StorageClassName
	}
	sc, ok := s.storageClasses[name]
	if !ok || sc.VolumeBindingMode == nil {
		return false
	}
	return *sc.VolumeBindingMode == "WaitForFirstConsumer"
}

// volumeZoneLabels are the PV labels VolumeZone compares with the node's.
var volumeZoneLabels = []string{
	corev1.LabelTopologyZone, corev1.LabelTopologyRegion,
	corev1.LabelFailureDomainBetaZone, corev1.LabelFailureDomainBetaRegion,
}

// volumeFilter is VolumeBinding's and VolumeZone's per-node check of the
// pod's bound volumes: their node affinity and zone labels must admit the node.
func volumeFilter(bound []*corev1.PersistentVolume, missing []string, node *corev1.Node) string {
	if len(missing) > 0 {
		return ReasonVolumeMissing
	}
	for _, pv := range bound {
		if pv.Spec.NodeAffinity != nil && pv.Spec.NodeAffinity.Required != nil {
			if ok, _ := nodeaffinity.NewLazyErrorNodeSelector(pv.Spec.NodeAffinity.Required).Match(node); !ok {
				return ReasonVolumeNodeAffinity
			}
		}
	}
	for _, pv := range bound {
		for _, key := range volumeZoneLabels {
			want, ok := pv.Labels[key]
			if !ok {
				continue
			}
			have, ok := node.Labels[key]
			if !ok || !zoneValueMatches(want, have) {
				return ReasonVolumeZone
			}
		}
	}
	return ""
}

// zoneValueMatches compares a PV zone label, which may list several zones
// separated by "__", with the node's zone.
func zoneValueMatches(pvValue, nodeValue string) bool {
	for _, z := range splitZones(pvValue) {
		if z == nodeValue {
			return true
		}
	}
	return false
}

func splitZones(v string) []string {
	var out []string
	start := 0
	for i := 0; i+1 < len(v); i++ {
		if v[i] == '_' && v[i+1] == '_' {
			out = append(out, v[start:i])
			start = i + 2
			i++
		}
	}
	return append(out, v[start:])
}

func namespaceLabels(s *Snapshot, ns string) labels.Set {
	if n, ok := s.namespaces[ns]; ok {
		return n.Labels
	}
	return nil
}
