package placement

import (
	"sort"
)

// The end-state search's steps through a Deployment's rollout: every
// event that can come next, and what the Deployment and ReplicaSet
// controllers do in one sync (how many pods to create and delete, which
// old pods may go).

// visitDeployment takes, from the current state, every event that can come
// next: the scheduler seeing an old pod's deletion, the scheduler placing a
// Pending new pod, or the Deployment controller scaling.
func (x *explorer) visitDeployment() {
	if !x.enter(-1) {
		return
	}
	if x.created == x.replicas && x.pending == 0 && x.oldLeft() == 0 {
		x.record()
		return
	}
	var moved bool
	defer x.markStuck(&moved)
	for k := range x.old {
		// Deletions are independent of each other: the first marked pod
		// stands for all of them, which keeps every interleaving with
		// placements while not permuting the deletions themselves.
		if x.marked[k] && !x.gone[k] {
			moved = true
			x.removeOld(k)
			x.visitDeployment()
			x.restoreOld(k, true)
			break
		}
	}
	if x.pending > 0 {
		for _, i := range x.placements() {
			moved = true
			x.pending--
			x.bindNew(i, x.pod)
			x.visitDeployment()
			x.unbindNew(i, x.pod)
			x.pending++
		}
	}
	create, victims := x.scale()
	if create > 0 || victims > 0 {
		for _, chosen := range x.victimChoices(victims) {
			moved = true
			x.created += create
			x.pending += create
			for _, k := range chosen {
				x.setOld(k, false, true)
			}
			x.visitDeployment()
			for _, k := range chosen {
				x.setOld(k, false, false)
			}
			x.created -= create
			x.pending -= create
		}
	}
}

// scale is one sync of the Deployment controller: how many new pods it
// creates and how many old ones it scales down, from the replica counts
// of both ReplicaSets and the new pods that are available (placed pods
// become Ready at once here: kwok and most rollouts without
// minReadySeconds). It follows rolloutRolling: scale the new ReplicaSet up
// within replicas+maxSurge, clean up unhealthy old pods, then scale down
// healthy ones while replicas-maxUnavailable stay available.
func (x *explorer) scale() (create, scaleDown int) {
	oldSpec, oldAvailable := 0, 0
	for k, o := range x.old {
		if x.gone[k] || x.marked[k] {
			continue
		}
		oldSpec++
		if o.rank.assigned && o.rank.ready && o.rank.phase == 2 {
			oldAvailable++
		}
	}
	if x.recreate {
		if oldSpec > 0 {
			return 0, oldSpec
		}
		if x.oldLeft() > 0 {
			return 0, 0
		}
		return x.replicas - x.created, 0
	}
	create = max(0, min(x.replicas, x.replicas+x.maxSurge-oldSpec)-x.created)
	available := x.created - x.pending
	minAvailable := x.replicas - x.maxUnavailable
	maxScaledDown := oldSpec + available - minAvailable
	if maxScaledDown <= 0 || oldSpec == 0 {
		return create, 0
	}
	cleanup := min(oldSpec-oldAvailable, maxScaledDown)
	healthy := max(0, min(oldSpec-cleanup, oldAvailable+available-minAvailable))
	return create, cleanup + healthy
}

// victimChoices lists the sets of n old pods the ReplicaSet controller may
// delete: ranked by staticRank, then by how many of the Deployment's active
// pods share the pod's node, more first; among pods equal so far, every
// choice of distinct nodes' pods is possible.
// maxVictimChoices bounds the sets of victims tried at one scale-down.
const maxVictimChoices = 64

func (x *explorer) victimChoices(n int) [][]int {
	if n == 0 {
		return [][]int{nil}
	}
	var active []int
	onNode := map[int]int{}
	for k, o := range x.old {
		if !x.gone[k] && !x.marked[k] {
			active = append(active, k)
			onNode[o.pos]++
		}
	}
	for i, c := range x.newOn {
		onNode[i] += int(c)
	}
	onNode[-1] += x.pending
	sort.SliceStable(active, func(a, b int) bool {
		oa, ob := x.old[active[a]], x.old[active[b]]
		if oa.rank != ob.rank {
			return oa.rank.less(ob.rank)
		}
		return onNode[oa.pos] > onNode[ob.pos]
	})
	if n >= len(active) {
		return [][]int{active}
	}
	equal := func(a, b int) bool {
		oa, ob := x.old[a], x.old[b]
		return oa.rank == ob.rank && onNode[oa.pos] == onNode[ob.pos]
	}
	// The pods strictly before the boundary's group are always deleted.
	start := n - 1
	for start > 0 && equal(active[start-1], active[n-1]) {
		start--
	}
	end := n
	for end < len(active) && equal(active[end], active[n-1]) {
		end++
	}
	fixed := active[:start]
	need := n - start
	// Group the tied pods by node: pods of one node are interchangeable.
	var nodes []int
	byNode := map[int][]int{}
	for _, k := range active[start:end] {
		pos := x.old[k].pos
		if _, ok := byNode[pos]; !ok {
			nodes = append(nodes, pos)
		}
		byNode[pos] = append(byNode[pos], k)
	}
	// after[j] is how many tied pods the nodes from j on hold: a branch
	// that cannot reach its count is not entered.
	after := make([]int, len(nodes)+1)
	for j := len(nodes) - 1; j >= 0; j-- {
		after[j] = after[j+1] + len(byNode[nodes[j]])
	}
	var out [][]int
	var pick func(j, left int, chosen []int)
	pick = func(j, left int, chosen []int) {
		if left == 0 {
			out = append(out, append(append([]int(nil), fixed...), chosen...))
			return
		}
		if after[j] < left {
			return
		}
		// Many tied pods on many nodes (a large Deployment) make more
		// choices than any search can try: try the first ones and say
		// the search is partial.
		if len(out) >= maxVictimChoices {
			x.cut = true
			return
		}
		pods := byNode[nodes[j]]
		for take := min(left, len(pods)); take >= 0; take-- {
			pick(j+1, left-take, append(chosen, pods[:take]...))
		}
	}
	pick(0, need, nil)
	return out
}
