package placement

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

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

// UpsertNode adds a node or replaces it, keeping the pods bound to it.
// The cached node order and topology domains are built from nodes' names
// and labels only, the node filters from their labels, taints and
// cordons: a node's heartbeat keeps them.
func (s *Snapshot) UpsertNode(n *corev1.Node) {
	alloc := resourcesFrom(n.Status.Allocatable)
	allowed := n.Status.Allocatable.Pods().Value()
	if id, ok := s.nodeByName[n.Name]; ok {
		ni := s.nodes[id]
		switch {
		case !maps.Equal(ni.node.Labels, n.Labels):
			s.dropNodeCaches()
		case ni.node.Spec.Unschedulable != n.Spec.Unschedulable || !equality.Semantic.DeepEqual(ni.node.Spec.Taints, n.Spec.Taints):
			// Cordoned, uncordoned or tainted: the node filters read it.
			s.filters, s.preferNoSchedule = nil, nil
		}
		if imagesChanged(ni.node, n) {
			s.images = nil
		}
		ni.node, ni.allocatable, ni.allowedPods = n, alloc, allowed
		s.forgetLoad(id)
		return
	}
	s.dropNodeCaches()
	ni := &nodeInfo{node: n, allocatable: alloc, allowedPods: allowed, pods: map[podID]struct{}{}}
	id := store(&s.nodes, &s.freeNodes, ni)
	s.nodeByName[n.Name] = id
	for pid := range s.unboundByNode[n.Name] {
		s.bind(pid, id)
	}
	delete(s.unboundByNode, n.Name)
}

// DeleteNode removes a node. Its pods stay in the snapshot, unbound, until
// they are deleted too, as the scheduler's cache keeps them.
func (s *Snapshot) DeleteNode(name string) {
	id, ok := s.nodeByName[name]
	if !ok {
		return
	}
	s.dropNodeCaches()
	for pid := range s.nodes[id].pods {
		s.pods[pid].node = noNode
		addTo(s.unboundByNode, name, pid)
	}
	s.nodes[id] = nil
	delete(s.nodeByName, name)
	s.freeNodes = append(s.freeNodes, id)
}
