package placement

// The scheduler stops filtering once it has found enough feasible nodes
// and scores only those, starting where its last cycle stopped
// (percentageOfNodesToScore). Below 100 nodes it filters them all.
const (
	minFeasibleNodesToFind           = 100
	minFeasibleNodesPercentageToFind = 5
)

// feasibleNodesToFind is how many feasible nodes the scheduler looks for
// among all: the profile's percentage, or else the adaptive default of
// 50 % less 1 % per 125 nodes, at least 5 %, and never fewer than 100.
func (p *Profile) feasibleNodesToFind(all int) int {
	if all < minFeasibleNodesToFind {
		return all
	}
	var percentage int
	if p.PercentageOfNodesToScore != nil {
		percentage = int(*p.PercentageOfNodesToScore)
	}
	if percentage == 0 {
		percentage = max(50-all/125, minFeasibleNodesPercentageToFind)
	}
	return max(all*percentage/100, minFeasibleNodesToFind)
}

// sampled reports whether the scheduler would score only some of the
// feasible nodes: then the node it picks depends on where its last cycle
// stopped, which cannot be known from outside.
func (p *Profile) sampled(all, feasible int) bool {
	return feasible > p.feasibleNodesToFind(all)
}
