package placement

// A rollout's simulation counts, per node and per domain of each topology
// its pod's terms name, the pods it places, and ranks the nodes: arrays as
// long as the cluster has nodes, made for every simulation and dropped
// when it ends. A judgement runs several simulations, and in the manager
// each array it makes is garbage the collector must find room for while
// the whole index of the cluster is marked; a collection that begins during
// a judgement makes the judgement help mark it. So a simulation gives its
// arrays back to the snapshot when it ends, and the next one takes them.
// Only arrays without pointers are kept, a few per length.

// maxSpares bounds the arrays kept per length.
const maxSpares = 16

// spareArrays are arrays of T given back, by length.
type spareArrays[T any] struct {
	byLen map[int][][]T
}

// take is an array of n zero values, a spare one when there is one.
func (sp *spareArrays[T]) take(n int) []T {
	list := sp.byLen[n]
	if len(list) == 0 {
		return make([]T, n)
	}
	a := list[len(list)-1]
	sp.byLen[n] = list[:len(list)-1]
	clear(a)
	return a
}

// give keeps a, whole, for a later take. The caller must not use a again.
func (sp *spareArrays[T]) give(a []T) {
	a = a[:cap(a)]
	if len(a) == 0 || len(sp.byLen[len(a)]) >= maxSpares {
		return
	}
	if sp.byLen == nil {
		sp.byLen = map[int][][]T{}
	}
	sp.byLen[len(a)] = append(sp.byLen[len(a)], a)
}

// spares are the arrays simulations gave back.
type spares struct {
	int32s spareArrays[int32]
}

// newDomainCounts counts pods per domain of t, from zero.
func (s *Snapshot) newDomainCounts(t *topology) *domainCounts {
	return &domainCounts{topo: t, counts: s.spares.int32s.take(len(t.names))}
}
