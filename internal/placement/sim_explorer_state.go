package placement

import (
	"fmt"
	"sort"
	"strconv"
)

// The explorer's states: told apart by a hash its moves keep up to date,
// and nodes told apart by what their future depends on.

// enter marks the current state visited; false when it was already, or
// when the budget is spent. States are told apart by a Zobrist hash kept
// up to date by every move, so that a state costs no more on 5,000 nodes
// than on 5.
func (x *explorer) enter(prefix int) bool {
	if len(x.seen) >= x.budget || x.s.interrupted() {
		x.cut = true
		return false
	}
	key := x.hash ^ mix(3, uint64(prefix+1), uint64(x.created)<<32|uint64(x.pending))
	if _, ok := x.seen[key]; ok {
		return false
	}
	x.seen[key] = struct{}{}
	return true
}

// mix is splitmix64's finaliser over a tagged pair: the hash of one fact
// about a state (a node holding n new pods, an old pod being gone).
func mix(tag, a, b uint64) uint64 {
	z := tag*0x9e3779b97f4a7c15 ^ a*0xbf58476d1ce4e5b9 ^ b*0x94d049bb133111eb
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// setNew and setOld change the state and its hash together.
func (x *explorer) setNew(i int, n int32) {
	x.hash ^= mix(1, uint64(i), uint64(x.newOn[i])) ^ mix(1, uint64(i), uint64(n))
	x.newOn[i] = n
}

func (x *explorer) setOld(k int, gone, marked bool) {
	x.hash ^= mix(2, uint64(k), oldState(x.gone[k], x.marked[k])) ^ mix(2, uint64(k), oldState(gone, marked))
	x.gone[k], x.marked[k] = gone, marked
}

func oldState(gone, marked bool) uint64 {
	switch {
	case gone:
		return 2
	case marked:
		return 1
	}
	return 0
}

// signature describes what a node's future depends on: its domains (or,
// where every domain is one node, only the counts), the pods counted there,
// the workload's pods on it, and its resources.
func (x *explorer) signature(i int) string {
	b := make([]byte, 0, 64)
	judged := x.e.spreads[x.ours].topo
	domain := func(t *topology, counts []int32) {
		d := t.domainOf[i]
		// The judged topology's domains are what an end state reports, so
		// they are never interchangeable.
		if !x.perNode[t] || t == judged {
			b = strconv.AppendInt(b, int64(d), 10)
			b = append(b, ':')
		}
		if d >= 0 {
			b = strconv.AppendInt(b, int64(counts[d]), 10)
		}
		b = append(b, ';')
	}
	for _, st := range x.e.spreads {
		domain(st.topo, st.counts)
	}
	for _, tc := range x.e.anti {
		domain(tc.topo, tc.counts)
	}
	for _, tc := range x.e.affinity {
		domain(tc.topo, tc.counts)
	}
	keys := make([]string, 0, len(x.e.existingAnti))
	for k := range x.e.existingAnti {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		dc := x.e.existingAnti[k]
		domain(dc.topo, dc.counts)
	}
	b = strconv.AppendInt(b, int64(x.newOn[i]), 10)
	b = append(b, '|')
	for k := range x.old {
		if o := x.old[k]; o.pos == i && !x.gone[k] {
			b = strconv.AppendBool(b, o.rank.ready)
			b = strconv.AppendInt(b, int64(o.rank.phase), 10)
			b = strconv.AppendInt(b, o.rank.cost, 10)
			b = strconv.AppendBool(b, x.marked[k])
			b = append(b, ',')
		}
	}
	ni := x.s.nodes[x.e.order[i]]
	extraReq, extraPods := x.e.extras.get(i)
	b = appendResources(append(b, '|'), ni.requested.plus(extraReq))
	b = appendResources(append(b, '|'), ni.allocatable)
	b = strconv.AppendInt(append(b, '|'), ni.podCount+int64(extraPods), 10)
	b = strconv.AppendInt(append(b, '/'), ni.allowedPods, 10)
	return string(b)
}

func appendResources(b []byte, r resources) []byte {
	b = strconv.AppendInt(b, r.milliCPU, 10)
	b = strconv.AppendInt(append(b, ','), r.memory, 10)
	b = strconv.AppendInt(append(b, ','), r.ephemeralStorage, 10)
	if len(r.scalar) > 0 {
		b = fmt.Append(b, r.scalar)
	}
	return b
}

// topologies are those the evaluator counts pods in.
func (x *explorer) topologies() []*topology {
	var out []*topology
	for _, st := range x.e.spreads {
		out = append(out, st.topo)
	}
	for _, tc := range x.e.anti {
		out = append(out, tc.topo)
	}
	for _, tc := range x.e.affinity {
		out = append(out, tc.topo)
	}
	for _, dc := range x.e.existingAnti {
		out = append(out, dc.topo)
	}
	return out
}

func singleNodeDomains(t *topology) bool {
	seen := make([]bool, len(t.names))
	for _, d := range t.domainOf {
		if d < 0 {
			continue
		}
		if seen[d] {
			return false
		}
		seen[d] = true
	}
	return true
}
