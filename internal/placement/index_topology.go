package placement

import "sort"

// topology interns the values of one node label as domain ids, so that the
// per-node checks of a simulation index slices instead of hashing strings.
// It is read-only once built.
type topology struct {
	key string
	// domainOf is the domain of each evaluated node, -1 without the label.
	domainOf []int32
	names    []string
	index    map[string]int32
	// shared: some domain holds more than one node, so a count kept per
	// domain changes what several nodes are judged by.
	shared bool
}

func newTopology(key string, s *Snapshot, order []nodeID) *topology {
	t := &topology{key: key, domainOf: make([]int32, len(order)), index: map[string]int32{}}
	labelled := 0
	for i, id := range order {
		v, ok := s.nodes[id].node.Labels[key]
		if !ok {
			t.domainOf[i] = -1
			continue
		}
		t.domainOf[i] = t.intern(v)
		labelled++
	}
	t.shared = labelled > len(t.names)
	return t
}

func (t *topology) intern(v string) int32 {
	if d, ok := t.index[v]; ok {
		return d
	}
	d := int32(len(t.names))
	t.names = append(t.names, v)
	t.index[v] = d
	return d
}

func (s *Snapshot) dropNodeCaches() {
	s.order = nil
	s.positions = nil
	s.filters = nil
	s.existingAnti = nil
	s.topologies = nil
	s.images = nil
	s.loadMemos = nil
	s.preferNoSchedule = nil
}

// liveNodes returns the ids of the nodes in name order, so that answers are
// deterministic. The slice is shared: callers must not change it.
func (s *Snapshot) liveNodes() []nodeID {
	if s.order != nil {
		return s.order
	}
	ids := make([]nodeID, 0, len(s.nodeByName))
	for _, id := range s.nodeByName {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return s.nodes[ids[i]].node.Name < s.nodes[ids[j]].node.Name })
	s.order = ids
	s.positions = make([]int32, len(s.nodes))
	for i := range s.positions {
		s.positions[i] = -1
	}
	for i, id := range ids {
		s.positions[id] = int32(i)
	}
	return ids
}

// livePositions maps each nodeID to its place in liveNodes, -1 for none.
// The slice is shared: callers must not change it.
func (s *Snapshot) livePositions() []int32 {
	s.liveNodes()
	return s.positions
}

// topology returns the interned domains of key over liveNodes, built once
// per node change.
func (s *Snapshot) topology(key string) *topology {
	if t, ok := s.topologies[key]; ok {
		return t
	}
	if s.topologies == nil {
		s.topologies = map[string]*topology{}
	}
	t := newTopology(key, s, s.liveNodes())
	s.topologies[key] = t
	return t
}

// slotOf is the domain of position i as PodTopologySpread's score keys it,
// by the label's value: a node without the label has the empty value, so
// shares the slot of a node labelled with "", or has the extra last slot.
func (t *topology) slotOf(i int) int32 {
	if d := t.domainOf[i]; d >= 0 {
		return d
	}
	if d, ok := t.index[""]; ok {
		return d
	}
	return int32(len(t.names))
}
