package placement

// topology interns the values of one node label as domain ids, so that the
// per-node checks of a simulation index slices instead of hashing strings.
// It is read-only once built.
type topology struct {
	key string
	// domainOf is the domain of each evaluated node, -1 without the label.
	domainOf []int32
	names    []string
	index    map[string]int32
}

func newTopology(key string, s *Snapshot, order []nodeID) *topology {
	t := &topology{key: key, domainOf: make([]int32, len(order)), index: map[string]int32{}}
	for i, id := range order {
		v, ok := s.nodes[id].node.Labels[key]
		if !ok {
			t.domainOf[i] = -1
			continue
		}
		t.domainOf[i] = t.intern(v)
	}
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

// domainOfNode is the domain of a snapshot node, -1 without the label or
// when the node is not evaluated.
func (e *evaluator) domainOfNode(t *topology, id nodeID) int32 {
	if id == noNode || int(id) >= len(e.posOf) || e.posOf[id] < 0 {
		return -1
	}
	return t.domainOf[e.posOf[id]]
}

// topologyFor returns the interned topology of key, shared by every
// evaluation until a node changes.
func (e *evaluator) topologyFor(key string) *topology { return e.s.topology(key) }
