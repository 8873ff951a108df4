package placement

// What the snapshot keeps between questions for the filters above it: the
// node filters' verdicts per template, existing pods' anti-affinity counts
// per incoming labels, and the codes of a filter's reasons. The filters
// fill them (filter_nodes.go, filter_existinganti.go); the snapshot owns them
// because it alone knows when a node or a pod changes, and forgets them
// then (dropNodeCaches).

// nodeFilters are the verdicts of the filters that read only the node and
// the pod's node-facing fields (its node name, node selector, required
// node affinity and tolerations), for every live node in order. One
// judgement asks several evaluations of the same template (the stage's
// rollout, then the rollouts of the fixes it offers), and a template's
// required node affinity over a hundred host names made these filters a
// fifth of a judgement; they are the same every time until a node
// changes, so the snapshot keeps them.
type nodeFilters struct {
	// reason is the code of each position's reason, 0 for none, and text
	// the text of each code (text[0] is "").
	reason []reasonCode
	text   []string
	// affinityOK says whether each position's node matches the required
	// node affinity and selector.
	affinityOK []bool
	// conflict is a set of node-name terms that names no node.
	conflict bool
	// noReasons and pass are made on first use: a zero code per position,
	// and the positions without a reason, in order.
	noReasons []reasonCode
	pass      []int
	// spreads are, by what they read (spreadEligibilityKey), which nodes
	// the template's hard spreads count: made on first use, shared read
	// only.
	spreads map[string]*spreadEligibility
}

// maxSpreadEligibilities bounds the spreads' eligibilities a template's
// filters keep.
const maxSpreadEligibilities = 16

// spreadEligibility is what PodTopologySpread's PreFilter reads of the
// nodes alone for one hard constraint: the nodes whose pods and domains
// count (they carry every hard constraint's key and pass the inclusion
// policies), and the domains holding at least one.
type spreadEligibility struct {
	eligible   []bool
	present    []bool
	numDomains int
}

// zeros is a code per position, every one 0. Shared: read only.
func (f *nodeFilters) zeros() []reasonCode {
	if f.noReasons == nil {
		f.noReasons = make([]reasonCode, len(f.reason))
	}
	return f.noReasons
}

// passing are the positions whose node passes the filters, in order.
// Shared: read only.
func (f *nodeFilters) passing() []int {
	if f.pass == nil {
		f.pass = make([]int, 0, len(f.reason))
		for i, r := range f.reason {
			if r == 0 {
				f.pass = append(f.pass, i)
			}
		}
	}
	return f.pass
}

// maxNodeFilters bounds the templates whose filters the snapshot keeps.
const maxNodeFilters = 64

// existingAntiCounts are the counts of one incoming pod's labels, by
// topology key.
type existingAntiCounts map[string]*domainCounts

// maxExistingAnti bounds the incoming labels the snapshot keeps counts for.
const maxExistingAnti = 64

// clone is a copy of the counts that may be changed.
func (c existingAntiCounts) clone() existingAntiCounts {
	out := make(existingAntiCounts, len(c))
	for key, dc := range c {
		out[key] = &domainCounts{topo: dc.topo, counts: append([]int32(nil), dc.counts...)}
	}
	return out
}

// domainCounts counts pods per domain of one topology.
type domainCounts struct {
	topo   *topology
	counts []int32
}

// reasonCode stands for one of an evaluation's static filter reasons.
type reasonCode uint16
