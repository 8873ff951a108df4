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

// spareMaps are sparse maps of touched nodes given back, emptied. A
// rollout of a hundred pods touches two hundred nodes; a map made for
// each simulation grew twice on the way there, which was a twentieth of
// an answer. A map grown past maxSpareMapLen entries is not kept: a
// cleared map keeps its room, and every later simulation would clear it
// whole.
type spareMaps[K comparable, V any] struct {
	maps []map[K]V
}

// maxSpareMapLen bounds the entries of a map kept for reuse.
const maxSpareMapLen = 4096

// take is an empty map, a spare one when there is one, else nil (made on
// first use).
func (sp *spareMaps[K, V]) take() map[K]V {
	n := len(sp.maps)
	if n == 0 {
		return nil
	}
	m := sp.maps[n-1]
	sp.maps = sp.maps[:n-1]
	return m
}

// give keeps m, emptied, for a later take. The caller must not use m again.
func (sp *spareMaps[K, V]) give(m map[K]V) {
	if m == nil || len(m) > maxSpareMapLen || len(sp.maps) >= maxSpares {
		return
	}
	clear(m)
	sp.maps = append(sp.maps, m)
}

// spares are the arrays and maps simulations gave back.
type spares struct {
	int32s  spareArrays[int32]
	extras  spareMaps[int32, nodeExtra]
	touched spareMaps[int32, touchedNode]
}

// newDomainCounts counts pods per domain of t, from zero.
func (s *Snapshot) newDomainCounts(t *topology) *domainCounts {
	return &domainCounts{topo: t, counts: s.spares.int32s.take(len(t.names))}
}
