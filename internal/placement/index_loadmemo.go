package placement

// What the snapshot keeps between questions for the resource scores: a
// question scores most nodes of the cluster, over a rollout's many
// placements, and each node's NodeResourcesFit and BalancedAllocation
// score for a pod of given requests reads only that node's allocatable
// and what its pods request. After a pod event only that pod's node
// scores differently, so the scores are kept per pod shape until the
// node's pods or allocatable change.

// maxLoadMemos bounds the pod shapes whose resource scores the snapshot
// keeps; the oldest is dropped for a new one.
const maxLoadMemos = 16

// loadKey is what a resource score reads of the pod and the profile.
type loadKey struct {
	profile *Profile
	// fit are the requests NodeResourcesFit's score charges, requested
	// BalancedAllocation's.
	fitCPU, fitMemory, requestedCPU, requestedMemory int64
}

// loadMemo is the resource scores of one pod shape, per position of the
// snapshot's live nodes; known marks those made.
type loadMemo struct {
	key    loadKey
	scores []int64
	known  []bool
}

// get is the kept score at position i, if any.
func (m *loadMemo) get(i int) (int64, bool) { return m.scores[i], m.known[i] }

func (m *loadMemo) put(i int, score int64) { m.scores[i], m.known[i] = score, true }

// loadMemo is the kept resource scores for key over the live nodes, made
// empty on first use.
func (s *Snapshot) loadMemo(key loadKey) *loadMemo {
	positions := len(s.liveNodes())
	for _, m := range s.loadMemos {
		if m.key == key && len(m.known) == positions {
			return m
		}
	}
	m := &loadMemo{key: key, scores: make([]int64, positions), known: make([]bool, positions)}
	if len(s.loadMemos) == maxLoadMemos {
		s.loadMemos = append(s.loadMemos[:0], s.loadMemos[1:]...)
	}
	s.loadMemos = append(s.loadMemos, m)
	return m
}

// forgetLoad drops every kept score of node nid: its pods or its
// allocatable changed.
func (s *Snapshot) forgetLoad(nid nodeID) {
	if len(s.loadMemos) == 0 || int(nid) >= len(s.positions) {
		return
	}
	if i := s.positions[nid]; i >= 0 {
		for _, m := range s.loadMemos {
			if int(i) < len(m.known) {
				m.known[i] = false
			}
		}
	}
}
