package placement

import "math/bits"

// The scheduler walks the nodes from where its last cycle stopped until
// it has found enough feasible ones. During a spread's rollout most of
// the nodes it walks past are in domains the spread rejects (with maxSkew
// 1 over ten zones, every zone already ahead of the others), and each of
// them costs a check. The walk here passes those domains' nodes over in
// bulk: it finds the same feasible nodes and stops at the same one, so
// the next walk starts where the scheduler's would.

// maxSkippedDomains bounds the domains of a topology whose nodes the walk
// can pass over in bulk: a set of candidates per domain is kept, so a
// key with a domain per node (hostname) is left to the checks.
const maxSkippedDomains = 64

// domainSets are, for one hard spread constraint, the candidates of each
// of its domains as a set of candidate indexes (a bit per candidate).
type domainSets struct {
	st       *spreadState
	byDomain [][]uint64
	// unlabelled: some candidate lacks the key, and fails the filter.
	unlabelled bool
}

// walk collects into p.feasible the candidates that pass the filters,
// from index start of cands onward and around, until it holds want of
// them, and returns how many candidates it went through (len(cands) when
// it went through all).
func (p *placer) walk(cands []int, start, want int) int {
	if allowed := p.allowedCandidates(cands); allowed != nil {
		return p.walkAllowed(cands, allowed, start, want)
	}
	n := len(cands)
	searched := 0
	for ; searched < n && len(p.feasible) < want; searched++ {
		if i := cands[(start+searched)%n]; p.e.nodeFits(i) {
			p.feasible = append(p.feasible, i)
		}
	}
	return searched
}

// walkAllowed is walk over the candidates set in allowed alone: the
// others fail a spread's filter. When the sets cover every spread, the
// ones allowed pass them all, and only the other checks are asked.
func (p *placer) walkAllowed(cands []int, allowed []uint64, start, want int) int {
	n := len(cands)
	spreadsPassed := len(p.sets) == len(p.e.spreads)
	fits := func(i int) bool {
		if spreadsPassed {
			return p.e.fitsBesideSpreads(i)
		}
		return p.e.nodeFits(i)
	}
	visit := func(from, to int) (stop int, done bool) {
		for w := from / 64; w*64 < to; w++ {
			word := allowed[w]
			if lo := from - w*64; lo > 0 {
				word &^= 1<<lo - 1
			}
			for word != 0 {
				k := w*64 + bits.TrailingZeros64(word)
				if k >= to {
					return 0, false
				}
				word &= word - 1
				if i := cands[k]; fits(i) {
					p.feasible = append(p.feasible, i)
					if len(p.feasible) == want {
						return k, true
					}
				}
			}
		}
		return 0, false
	}
	if len(p.feasible) >= want {
		return 0
	}
	if k, done := visit(start, n); done {
		return k - start + 1
	}
	if k, done := visit(0, start); done {
		return n - start + k + 1
	}
	return n
}

// allowedCandidates is the set of candidates in domains every skippable
// hard spread accepts now, or nil when no spread rejects a domain (or
// none can be skipped): then every candidate is walked.
func (p *placer) allowedCandidates(cands []int) []uint64 {
	sets := p.domainSets(cands)
	if len(sets) == 0 {
		return nil
	}
	words := (len(cands) + 63) / 64
	var allowed []uint64
	for _, ds := range sets {
		if !ds.rejectsAny() {
			continue
		}
		union := p.union(words)
		for d, set := range ds.byDomain {
			if ds.st.keepsSkew(int32(d)) {
				for w, v := range set {
					union[w] |= v
				}
			}
		}
		if allowed == nil {
			allowed = append(p.allowed[:0], union...)
			continue
		}
		for w := range allowed {
			allowed[w] &= union[w]
		}
	}
	if allowed != nil {
		p.allowed = allowed
	}
	return allowed
}

// union is the placer's buffer for one spread's accepted candidates,
// emptied.
func (p *placer) union(words int) []uint64 {
	if cap(p.unionBuf) < words {
		p.unionBuf = make([]uint64, words)
	}
	p.unionBuf = p.unionBuf[:words]
	clear(p.unionBuf)
	return p.unionBuf
}

// domainSets are the sets of the evaluation's hard spreads whose domains
// are few enough, made for cands on first use and again whenever the
// candidates change.
func (p *placer) domainSets(cands []int) []domainSets {
	if p.setsFor == p.e.candidatesSet && p.setsMade {
		return p.sets
	}
	p.sets, p.setsFor, p.setsMade = p.sets[:0], p.e.candidatesSet, true
	words := (len(cands) + 63) / 64
	for _, st := range p.e.spreads {
		if len(st.present) > maxSkippedDomains {
			continue
		}
		ds := domainSets{st: st, byDomain: make([][]uint64, len(st.present))}
		flat := make([]uint64, words*len(st.present))
		for d := range ds.byDomain {
			ds.byDomain[d] = flat[d*words : (d+1)*words]
		}
		for k, i := range cands {
			if d := st.topo.domainOf[i]; d >= 0 {
				ds.byDomain[d][k/64] |= 1 << (k % 64)
			} else {
				ds.unlabelled = true
			}
		}
		p.sets = append(p.sets, ds)
	}
	return p.sets
}

// rejectsAny reports whether some candidate fails the constraint now.
func (ds *domainSets) rejectsAny() bool {
	if ds.unlabelled {
		return true
	}
	for d := range ds.byDomain {
		if !ds.st.keepsSkew(int32(d)) {
			return true
		}
	}
	return false
}
