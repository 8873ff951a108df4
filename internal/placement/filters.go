package placement

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// The scheduler's reasons, word for word, so that an answer reads like the
// FailedScheduling event a person already knows.
const (
	ReasonNodeName             = "node(s) didn't match the requested node name"
	ReasonUnschedulable        = "node(s) were unschedulable"
	ReasonUntoleratedTaint     = "node(s) had untolerated taint(s)"
	ReasonNodeAffinity         = "node(s) didn't match Pod's node affinity/selector"
	ReasonVolumeNodeAffinity   = "node(s) didn't match PersistentVolume's node affinity"
	ReasonVolumeMissing        = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
	ReasonVolumeZone           = "node(s) had no available volume zone"
	ReasonVolumeBindConflict   = "node(s) didn't find available persistent volumes to bind"
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

// nodeFilter returns the reason the first of NodeName, NodeUnschedulable,
// TaintToleration and NodeAffinity rejects the node for, "" if none does.
// None of them depends on other pods, so an evaluation computes it once.
func nodeFilter(pod *corev1.Pod, aff nodeaffinity.RequiredNodeAffinity, node *corev1.Node) string {
	logger := klog.Background()
	// A template that names a node pins every pod to it.
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != node.Name {
		return ReasonNodeName
	}
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

func namespaceLabels(s *Snapshot, ns string) labels.Set {
	if n, ok := s.namespaces[ns]; ok {
		return n.Labels
	}
	return nil
}
