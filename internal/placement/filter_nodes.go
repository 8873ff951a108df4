package placement

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
)

// nodeFiltersOf returns pod's node filters over the live nodes, as the
// nodes are in the snapshot, or as altered replaces some of them. The
// answer is shared: callers must not change it.
func (s *Snapshot) nodeFiltersOf(pod *corev1.Pod, altered map[nodeID]*corev1.Node) *nodeFilters {
	if len(altered) > 0 {
		return s.computeNodeFilters(pod, altered)
	}
	key, err := nodeFilterKey(pod)
	if err != nil {
		return s.computeNodeFilters(pod, nil)
	}
	if f, ok := s.filters[key]; ok {
		return f
	}
	f := s.computeNodeFilters(pod, nil)
	if s.filters == nil || len(s.filters) >= maxNodeFilters {
		s.filters = map[string]*nodeFilters{}
	}
	s.filters[key] = f
	return f
}

// nodeFilterKey is what the node filters read of a pod.
func nodeFilterKey(pod *corev1.Pod) (string, error) {
	var required *corev1.NodeSelector
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		required = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	b, err := json.Marshal(struct {
		NodeName    string
		Selector    map[string]string
		Required    *corev1.NodeSelector
		Tolerations []corev1.Toleration
	}{pod.Spec.NodeName, pod.Spec.NodeSelector, required, pod.Spec.Tolerations})
	return string(b), err
}

func (s *Snapshot) computeNodeFilters(pod *corev1.Pod, altered map[nodeID]*corev1.Node) *nodeFilters {
	order := s.liveNodes()
	f := &nodeFilters{reason: make([]reasonCode, len(order)), text: []string{""}, affinityOK: make([]bool, len(order))}
	codes := map[string]reasonCode{}
	aff := newNodeMatcher(pod)
	// NodeAffinity's PreFilter: a node it leaves out is not filtered.
	var names map[string]bool
	if s.profile.filters(FilterNodeAffinity) {
		names, f.conflict = affinityNodeNames(pod)
	}
	for i, id := range order {
		node := s.nodes[id].node
		if n, ok := altered[id]; ok {
			node = n
		}
		f.affinityOK[i] = aff.Match(node)
		reason := nodeFilterMatched(s.profile, pod, node, f.affinityOK[i])
		if names != nil && !names[node.Name] {
			reason = ReasonNodeAffinityPreFilter
		}
		if reason == "" {
			continue
		}
		c, ok := codes[reason]
		if !ok {
			c = reasonCode(len(f.text))
			f.text = append(f.text, reason)
			codes[reason] = c
		}
		f.reason[i] = c
	}
	return f
}
