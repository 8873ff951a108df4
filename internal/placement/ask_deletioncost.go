package placement

import (
	"cmp"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The ReplicaSet controller chooses the pods a scale-down removes by rank
// (ActivePodsWithRanks): pods not yet placed, not Running or not Ready go
// first, then the lower pod-deletion-cost, and only then the pods doubled
// up on a node, which knows nothing of zones. A Deployment spread 2/2/2
// over three zones and scaled to 3 can therefore end 2/1/0 under a hard
// spread (kubernetes#124149).
//
// Costs that keep the spread rank each domain's pods by level: the pod
// kept longest in a domain is level 0 (cost 0), the next level 1 (cost
// -1), and so on. A scale-down by k removes the k lowest costs, the
// highest levels first, so it always takes from the most crowded domains:
// the skew it leaves is never above the skew before it, or 1. A pod that
// joins a domain takes the next level, so keeping the ranking costs one
// write per new pod; a pod that leaves moves the levels above it down.

// noDomainCost is the cost of a pod on a node without the topology key: it
// counts in no domain, so a scale-down takes it before any that does.
const noDomainCost = -1 << 20

// CostChange is one write that brings a pod's ranking where it should be.
type CostChange struct {
	Namespace, Name string
	UID             types.UID
	// Cost is the pod-deletion-cost to write, with its mark; nil removes
	// both.
	Cost *int32
}

// CostPlan is how a workload's pods should rank for the scale-downs of
// their controller, and what must be written to get there.
type CostPlan struct {
	// Changes are the writes, in the order of the pods' names.
	Changes []CostChange
	// Foreign names a pod whose pod-deletion-cost placement-guard did not
	// write: its owner ranks the pods, and the plan changes nothing.
	Foreign string
	// Counts are the workload's placed pods per domain of the key.
	Counts map[string]int
	// Ranked is how many pods the plan gives a cost.
	Ranked int
}

// rankedPod is a placed pod of the workload with what orders it within
// its domain.
type rankedPod struct {
	pi *podInfo
	// ours is the cost placement-guard wrote, when the pod carries it.
	ours    int32
	hasOurs bool
}

// PlanDeletionCosts is the ranking that keeps the workload's spread over
// the domains of key through its controller's scale-downs, as changes to
// the pods' costs. Pods not yet placed need none: the controller removes
// them first whatever their cost.
func (s *Snapshot) PlanDeletionCosts(w *Workload, key string) CostPlan {
	plan := CostPlan{Counts: map[string]int{}}
	byDomain := map[string][]rankedPod{}
	var noDomain []rankedPod
	for _, id := range s.workloadPods(w.Pods) {
		pi := s.pods[id]
		if pi.node == noNode {
			continue
		}
		rp := rankedPod{pi: pi}
		cost, owned, foreign := costOf(pi)
		if foreign {
			plan.Foreign = pi.name
			plan.Changes = nil
			return plan
		}
		rp.ours, rp.hasOurs = cost, owned
		domain, ok := s.nodes[pi.node].node.Labels[key]
		if !ok {
			noDomain = append(noDomain, rp)
			continue
		}
		plan.Counts[domain]++
		byDomain[domain] = append(byDomain[domain], rp)
	}
	for _, pods := range byDomain {
		slices.SortFunc(pods, keptFirst)
		for level, rp := range pods {
			plan.add(rp, int32(-level))
		}
	}
	for _, rp := range noDomain {
		plan.add(rp, noDomainCost)
	}
	slices.SortFunc(plan.Changes, func(a, b CostChange) int { return cmp.Compare(a.Name, b.Name) })
	return plan
}

// add gives rp cost, writing it unless the pod carries it already.
func (p *CostPlan) add(rp rankedPod, cost int32) {
	p.Ranked++
	if rp.hasOurs && rp.ours == cost {
		return
	}
	p.Changes = append(p.Changes, CostChange{Namespace: rp.pi.namespace(), Name: rp.pi.name, UID: rp.pi.uid, Cost: &cost})
}

// keptFirst orders a domain's pods from the one kept longest: those
// already ranked keep their order, so that a new pod changes only its own
// cost; the others follow, the oldest first.
func keptFirst(a, b rankedPod) int {
	if a.hasOurs != b.hasOurs {
		if a.hasOurs {
			return -1
		}
		return 1
	}
	if a.hasOurs && a.ours != b.ours {
		return cmp.Compare(b.ours, a.ours)
	}
	if c := a.pi.created.Compare(b.pi.created.Time); c != 0 {
		return c
	}
	return cmp.Compare(a.pi.name, b.pi.name)
}

// ClearDeletionCosts are the changes that take placement-guard's costs off
// the workload's pods, leaving costs anyone else wrote.
func (s *Snapshot) ClearDeletionCosts(w *Workload) []CostChange {
	var out []CostChange
	for _, id := range s.workloadPods(w.Pods) {
		pi := s.pods[id]
		if _, ours, _ := costOf(pi); ours || (pi.annotation(DeletionCostMark) != "" && pi.annotation(corev1.PodDeletionCost) == "") {
			out = append(out, CostChange{Namespace: pi.namespace(), Name: pi.name, UID: pi.uid})
		}
	}
	slices.SortFunc(out, func(a, b CostChange) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// costOf reads a pod's cost: the one placement-guard wrote (ours), or one
// someone else did (foreign). A mark whose cost was removed is neither:
// the pod is ranked afresh.
func costOf(pi *podInfo) (cost int32, ours, foreign bool) {
	v := pi.annotation(corev1.PodDeletionCost)
	if v == "" {
		return 0, false, false
	}
	if pi.annotation(DeletionCostMark) != v {
		return 0, false, true
	}
	c, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, false, true
	}
	return int32(c), true, false
}
