package placement

import corev1 "k8s.io/api/core/v1"

// Node is the node of that name as last taken in; callers must not change
// it.
func (s *Snapshot) Node(name string) (*corev1.Node, bool) {
	id, ok := s.nodeByName[name]
	if !ok {
		return nil, false
	}
	return s.nodes[id].node, true
}

// NodeNames are the names of the snapshot's nodes, in no order.
func (s *Snapshot) NodeNames() []string {
	out := make([]string, 0, len(s.nodeByName))
	for name := range s.nodeByName {
		out = append(out, name)
	}
	return out
}
