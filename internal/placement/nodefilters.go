package placement

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
)

// nodeFilters are the verdicts of the filters that read only the node and
// the pod's node-facing fields (its node name, node selector, required
// node affinity and tolerations), for every live node in order. One
// judgement asks several evaluations of the same template (the stage's
// rollout, then the rollouts of the fixes it offers), and a template's
// required node affinity over a hundred host names made these filters a
// fifth of a judgement; they are the same every time until a node
// changes, so the snapshot keeps them.
type nodeFilters struct {
	// reason is the code of each position's reason, 0 for none, and text
	// the text of each code (text[0] is "").
	reason []reasonCode
	text   []string
	// affinityOK says whether each position's node matches the required
	// node affinity and selector.
	affinityOK []bool
	// conflict is a set of node-name terms that names no node.
	conflict bool
	// noReasons and pass are made on first use: a zero code per position,
	// and the positions without a reason, in order.
	noReasons []reasonCode
	pass      []int
}

// zeros is a code per position, every one 0. Shared: read only.
func (f *nodeFilters) zeros() []reasonCode {
	if f.noReasons == nil {
		f.noReasons = make([]reasonCode, len(f.reason))
	}
	return f.noReasons
}

// passing are the positions whose node passes the filters, in order.
// Shared: read only.
func (f *nodeFilters) passing() []int {
	if f.pass == nil {
		f.pass = make([]int, 0, len(f.reason))
		for i, r := range f.reason {
			if r == 0 {
				f.pass = append(f.pass, i)
			}
		}
	}
	return f.pass
}

// maxNodeFilters bounds the templates whose filters the snapshot keeps.
const maxNodeFilters = 64

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
	names, conflict := affinityNodeNames(pod)
	f.conflict = conflict
	for i, id := range order {
		node := s.nodes[id].node
		if n, ok := altered[id]; ok {
			node = n
		}
		f.affinityOK[i] = aff.Match(node)
		reason := nodeFilterMatched(pod, node, f.affinityOK[i])
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
