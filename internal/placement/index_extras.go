package placement

// nodeExtras are the pods a simulation bound to (positive) or removed from
// (negative) each evaluated node, on top of the snapshot: their requests
// and their count. A simulation touches the few nodes its pods land on or
// leave, of thousands, and an admission check asks a few evaluators a
// judgement: a dense array per evaluator was a quarter of what a
// judgement allocated, and pointers the garbage collector had to scan. So
// the extras are sparse: a bit per position says whether the map holds
// an entry, and the hot path reads one word for an untouched node.
type nodeExtras struct {
	touched []uint64
	at      map[int32]nodeExtra
}

// touchedHint is the room a simulation's sparse maps of touched nodes
// are made with.
const touchedHint = 64

type nodeExtra struct {
	req  resources
	pods int32
}

// nonZero are requests as the scheduler's scoring counts them, a
// container without a request counted at the scheduler's default.
type nonZero struct{ cpu, memory int64 }

// touchedNode is what a simulation changed at a node as the scorer reads
// it: the requests it added or took away, and the node's score since,
// kept until the next change there. It is declared here, beside the
// filters' own extras, so that the snapshot can keep spare maps of it.
type touchedNode struct {
	nonZero
	score  int64
	scored bool
}

func newNodeExtras(positions int) nodeExtras {
	return nodeExtras{touched: make([]uint64, (positions+63)/64)}
}

// get returns the extra requests and pods at position i; the requests are
// shared and must not be changed.
func (x *nodeExtras) get(i int) (resources, int32) {
	if x.touched[i/64]&(1<<(uint(i)%64)) == 0 {
		return resources{}, 0
	}
	e := x.at[int32(i)]
	return e.req, e.pods
}

// touchedAt reports whether a simulation bound or removed a pod at
// position i.
func (x *nodeExtras) touchedAt(i int) bool { return x.touched[i/64]&(1<<(uint(i)%64)) != 0 }

// account adds (delta 1) or takes away (-1) a pod requesting req at
// position i.
func (x *nodeExtras) account(i int, req resources, delta int32) {
	word, bit := i/64, uint64(1)<<(uint(i)%64)
	if x.touched[word]&bit == 0 {
		if x.at == nil {
			// A rollout touches a node for each pod it places or
			// deletes: room for a small one's saves the first growths.
			x.at = make(map[int32]nodeExtra, touchedHint)
		}
		x.touched[word] |= bit
	}
	e := x.at[int32(i)]
	if delta > 0 {
		e.req.add(req)
	} else {
		e.req.sub(req)
	}
	e.pods += delta
	x.at[int32(i)] = e
}
