package placement

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// The scheduler's reasons, word for word, so that an answer reads like the
// FailedScheduling event a person already knows.
const (
	ReasonNodeName         = "node(s) didn't match the requested node name"
	ReasonUnschedulable    = "node(s) were unschedulable"
	ReasonUntoleratedTaint = "node(s) had untolerated taint(s)"
	ReasonNodeAffinity     = "node(s) didn't match Pod's node affinity/selector"
	// ReasonNodeAffinityPreFilter is what the scheduler says of the nodes a
	// required node affinity on metadata.name leaves out before filtering.
	ReasonNodeAffinityPreFilter = "node(s) didn't satisfy plugin(s) [NodeAffinity]"
	reasonNodeAffinityConflict  = "pod affinity terms conflict"
	ReasonVolumeNodeAffinity    = "node(s) didn't match PersistentVolume's node affinity"
	ReasonVolumeMissing         = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
	ReasonVolumeZone            = "node(s) had no available volume zone"
	ReasonVolumeBindConflict    = "node(s) didn't find available persistent volumes to bind"
	ReasonSpread                = "node(s) didn't match pod topology spread constraints"
	ReasonSpreadMissingLabel    = ReasonSpread + " (missing required label)"
	ReasonAffinity              = "node(s) didn't match pod affinity rules"
	ReasonAntiAffinity          = "node(s) didn't match pod anti-affinity rules"
	ReasonExistingAntiAffinity  = "node(s) didn't satisfy existing pods anti-affinity rules"
)

// doNotSchedule keeps the taints that filter: NoSchedule and NoExecute.
func doNotSchedule(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

// nodeFilter returns the reason the first of NodeName, NodeUnschedulable,
// TaintToleration and NodeAffinity rejects the node for, "" if none does.
// None of them depends on other pods, so an evaluation computes it once.
func nodeFilter(p *Profile, pod *corev1.Pod, aff nodeaffinity.RequiredNodeAffinity, node *corev1.Node) string {
	// A selector that fails to parse matches no node, as in the scheduler.
	ok, _ := aff.Match(node)
	return nodeFilterMatched(p, pod, node, ok)
}

// nodeFilterMatched is nodeFilter for a node whose match with the pod's
// required node affinity is known: the evaluator keeps that match too, and
// a long selector is matched once per node.
func nodeFilterMatched(p *Profile, pod *corev1.Pod, node *corev1.Node, affinityMatches bool) string {
	logger := klog.Background()
	// A template that names a node pins every pod to it.
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != node.Name && p.filters(FilterNodeName) {
		return ReasonNodeName
	}
	if node.Spec.Unschedulable && p.filters(FilterNodeUnschedulable) && !corev1helpers.TolerationsTolerateTaint(logger, pod.Spec.Tolerations,
		&corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}, false) {
		return ReasonUnschedulable
	}
	if p.filters(FilterTaintToleration) {
		if _, bad := corev1helpers.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, pod.Spec.Tolerations, doNotSchedule, false); bad {
			return ReasonUntoleratedTaint
		}
	}
	if !affinityMatches && p.filters(FilterNodeAffinity) {
		return ReasonNodeAffinity
	}
	return ""
}

// affinityNodeNames is NodeAffinity's PreFilter: when every required node
// selector term names nodes (matchFields metadata.name In), only those
// nodes are filtered at all; nil when some term names none. conflict is a
// set of terms that names no node.
func affinityNodeNames(pod *corev1.Pod) (names map[string]bool, conflict bool) {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil, false
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) == 0 {
		return nil, false
	}
	names = map[string]bool{}
	for _, t := range terms {
		var termNames map[string]bool
		for _, r := range t.MatchFields {
			if r.Key != metav1.ObjectNameField || r.Operator != corev1.NodeSelectorOpIn {
				continue
			}
			values := map[string]bool{}
			for _, v := range r.Values {
				if termNames == nil || termNames[v] {
					values[v] = true
				}
			}
			termNames = values
		}
		if termNames == nil {
			return nil, false
		}
		for n := range termNames {
			names[n] = true
		}
	}
	return names, len(names) == 0
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
