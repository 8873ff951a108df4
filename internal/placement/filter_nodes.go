package placement

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
)

// nodeFiltersOf returns pod's node filters under profile p over the live
// nodes, as the nodes are in the snapshot, or as altered replaces some of
// them. The answer is shared: callers must not change it.
func (s *Snapshot) nodeFiltersOf(pod *corev1.Pod, p *Profile, altered map[nodeID]*corev1.Node) *nodeFilters {
	if len(altered) > 0 {
		return s.computeNodeFilters(pod, p, altered)
	}
	key, err := nodeFilterKey(pod, p)
	if err != nil {
		return s.computeNodeFilters(pod, p, nil)
	}
	if f, ok := s.filters[key]; ok {
		return f
	}
	f := s.computeNodeFilters(pod, p, nil)
	if s.filters == nil || len(s.filters) >= maxNodeFilters {
		s.filters = map[string]*nodeFilters{}
	}
	s.filters[key] = f
	return f
}

// nodeFilterKey is what the node filters read of a pod and its profile:
// the profile's added affinity and the filters it turns off are its own.
func nodeFilterKey(pod *corev1.Pod, p *Profile) (string, error) {
	var required *corev1.NodeSelector
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		required = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	b, err := json.Marshal(struct {
		Profile     string
		NodeName    string
		Selector    map[string]string
		Required    *corev1.NodeSelector
		Tolerations []corev1.Toleration
	}{p.Name, pod.Spec.NodeName, pod.Spec.NodeSelector, required, pod.Spec.Tolerations})
	return string(b), err
}

func (s *Snapshot) computeNodeFilters(pod *corev1.Pod, p *Profile, altered map[nodeID]*corev1.Node) *nodeFilters {
	order := s.liveNodes()
	f := &nodeFilters{reason: make([]reasonCode, len(order)), text: []string{""}, affinityOK: make([]bool, len(order))}
	codes := map[string]reasonCode{}
	aff := newNodeMatcher(pod)
	// NodeAffinity's PreFilter: a node it leaves out is not filtered.
	var names map[string]bool
	if p.filters(FilterNodeAffinity) {
		names, f.conflict = affinityNodeNames(pod)
	}
	for i, id := range order {
		node := s.nodes[id].node
		if n, ok := altered[id]; ok {
			node = n
		}
		f.affinityOK[i] = aff.Match(node)
		reason := nodeFilterMatched(p, pod, node, f.affinityOK[i])
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
