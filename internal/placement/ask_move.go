package placement

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/placement-guard/placement-guard/internal/brief"
)

// A spread the scheduler could only honour as well as the nodes of its
// moment allowed (a soft stage applied while a zone had no node, pods that
// fled a zone during an outage) stays uneven: nothing moves running pods.
// PlanMove answers which pod to move so that its replacement, placed as the
// scheduler places it, makes the spread more even, one pod at a time.

// maxMoveSimulations bounds the candidate moves simulated for one answer,
// and movedReplacementNamePostfix names the replacement of a moved pod.
const (
	maxMoveSimulations          = 8
	movedReplacementNamePostfix = "-moved"
)

// PlannedMove is one pod to evict and where its replacement lands.
type PlannedMove struct {
	Pod string
	UID types.UID
	// From is the pod's domain; To and Node where the replacement lands.
	From, To, Node string
}

// MovePlan is the engine's answer on moving a workload's pods.
type MovePlan struct {
	// Move is the pod to move, nil when no move makes the spread more even.
	Move *PlannedMove
	// Counts are the pods the spread counts per eligible domain, and Skew
	// their largest difference.
	Counts map[string]int
	Skew   int
	// Even is true when no move can make the spread more even.
	Even bool
	// Why says, when Move is nil, why nothing moves.
	Why string
}

// PlanMove finds the pod of the workload whose move makes its placement
// under c more even: for a spread, a pod of the most crowded domains whose
// replacement the scheduler would place in a domain with at least two
// pods fewer; for anti-affinity, a pod sharing its domain with another of
// the workload's whose replacement would land in a domain with none (the
// soft form leaves pods together while domains are missing). Pods that
// are not Ready, that mount a claim (a volume the move cannot take
// along), that carry an annotation keeping them, or that movable refuses
// (it says why) stay.
func (s *Snapshot) PlanMove(w *Workload, c Constraint, movable func(*corev1.Pod) string) (MovePlan, error) {
	key := c.TopologyKey()
	if key == "" {
		return MovePlan{Even: true, Why: "the constraint has no topology key to rebalance over"}, nil
	}
	m, err := s.Measure(w, c)
	if err != nil {
		return MovePlan{}, err
	}
	plan := MovePlan{Counts: m.Counts, Skew: m.Skew}
	lowest := minCount(m.Counts)
	if c.AntiAffinity != nil && s.someDomainWithout(key, m.Counts) {
		// Anti-affinity counts the domains the workload runs in only; a
		// node of another domain is room for a replacement.
		lowest = 0
	}
	candidates := s.moveCandidates(w, key, m.Counts, lowest)
	if len(candidates) == 0 {
		plan.Even, plan.Why = true, fmt.Sprintf("the placement is as even as moving one pod can make it (%s)", DescribeCounts(m.Counts))
		return plan, nil
	}
	var kept, nowhere []string
	simulated := 0
	for _, cand := range candidates {
		pi := s.pods[cand.id]
		if why := s.keptWhere(pi, movable); why != "" {
			kept = append(kept, pi.name+" ("+why+")")
			continue
		}
		if simulated == maxMoveSimulations {
			break
		}
		simulated++
		to, node, err := s.replacementDomain(w, cand.id, key, m.Counts, cand.domain)
		if err != nil {
			return plan, err
		}
		if node != "" && m.Counts[to]+1 < m.Counts[cand.domain] {
			plan.Move = &PlannedMove{Pod: pi.name, UID: pi.uid, From: cand.domain, To: to, Node: node}
			return plan, nil
		}
		where := "nowhere"
		if node != "" {
			where = "in " + to
		}
		nowhere = append(nowhere, fmt.Sprintf("%s's replacement would land %s", pi.name, where))
	}
	switch {
	case len(nowhere) > 0:
		plan.Even, plan.Why = true, fmt.Sprintf("no move makes the placement more even (%s): %s", DescribeCounts(m.Counts), brief.FirstFew(nowhere, 3, ", "))
	default:
		plan.Why = fmt.Sprintf("the placement could be more even (%s), but no pod of the crowded domains may move: %s", DescribeCounts(m.Counts), brief.FirstFew(kept, 3, ", "))
	}
	return plan, nil
}

// moveCandidate is a pod of a crowded domain.
type moveCandidate struct {
	id     podID
	domain string
	// neighbours are the workload's pods on its node.
	neighbours int
}

// moveCandidates are the workload's placed pods in domains with at least
// two more pods than the least crowded, the most crowded domains first,
// then the pods doubled up on a node, the youngest, by name.
func (s *Snapshot) moveCandidates(w *Workload, key string, counts map[string]int, lowest int) []moveCandidate {
	own := s.workloadPods(w.Pods)
	perNode := map[nodeID]int{}
	for _, id := range own {
		if n := s.pods[id].node; n != noNode {
			perNode[n]++
		}
	}
	var out []moveCandidate
	for _, id := range own {
		pi := s.pods[id]
		if pi.node == noNode || !w.currentRevision(pi.common()) {
			continue
		}
		domain, ok := s.nodes[pi.node].node.Labels[key]
		if !ok || counts[domain] < lowest+2 {
			continue
		}
		out = append(out, moveCandidate{id: id, domain: domain, neighbours: perNode[pi.node]})
	}
	slices.SortFunc(out, func(a, b moveCandidate) int {
		if c := cmp.Compare(counts[b.domain], counts[a.domain]); c != 0 {
			return c
		}
		if c := cmp.Compare(b.neighbours, a.neighbours); c != 0 {
			return c
		}
		pa, pb := s.pods[a.id], s.pods[b.id]
		if c := pb.created.Compare(pa.created.Time); c != 0 {
			return c
		}
		return cmp.Compare(pa.name, pb.name)
	})
	return out
}

// LocalData says what data a pod keeps on its node, which a move leaves
// behind or loses: a hostPath volume, or an emptyDir on the node's disk
// (a memory-backed one dies with any restart). "" when it keeps none.
// Cluster-autoscaler and the descheduler keep such pods where they are by
// default; so does a migration's rebalance.
func LocalData(pod *corev1.Pod) string {
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.HostPath != nil:
			return fmt.Sprintf("keeps data on its node (hostPath volume %s)", v.Name)
		case v.EmptyDir != nil && v.EmptyDir.Medium != corev1.StorageMediumMemory:
			return fmt.Sprintf("keeps data on its node (emptyDir volume %s on the node's disk)", v.Name)
		}
	}
	return ""
}

// keptWhere says why a pod stays where it is, "" when it may move.
func (s *Snapshot) keptWhere(pi *podInfo, movable func(*corev1.Pod) string) string {
	status, _, _ := pi.ready()
	switch {
	case status != corev1.ConditionTrue:
		return "not Ready"
	case pi.annotation(safeToEvictAnnotation) == "false":
		return safeToEvictAnnotation + "=false"
	case pi.annotation(doNotDisruptAnnotation) == "true":
		return doNotDisruptAnnotation
	case pi.annotation(preferNoEvictionAnnotation) != "":
		return preferNoEvictionAnnotation
	}
	pod := pi.materialize()
	if len(podClaims(pod)) > 0 {
		return "mounts a claim the move cannot take along"
	}
	if movable != nil {
		return movable(pod)
	}
	return ""
}

// replacementDomain is where the scheduler would place the replacement of
// pod id, which left a domain of counts (the spread's counts before it
// left): a node of the best score with the pod gone, the one in the least
// crowded domain of key when the best are tied across domains. Node ""
// when it fits nowhere, or only on nodes without key.
func (s *Snapshot) replacementDomain(w *Workload, id podID, key string, counts map[string]int, from string) (string, string, error) {
	p, err := s.newPlacer(w, newPod(w, w.Name+movedReplacementNamePostfix, nil))
	if err != nil {
		return "", "", err
	}
	defer p.release()
	p.remove(id)
	count := func(domain string) int {
		if domain == from {
			return counts[domain] - 1
		}
		return counts[domain]
	}
	best, bestCount := -1, 0
	for _, i := range p.bestSet() {
		domain, ok := s.nodes[p.e.order[i]].node.Labels[key]
		if !ok {
			continue
		}
		if c := count(domain); best < 0 || c < bestCount {
			best, bestCount = i, c
		}
	}
	if best < 0 {
		return "", "", nil
	}
	node := s.nodes[p.e.order[best]].node
	return node.Labels[key], node.Name, nil
}

// someDomainWithout reports a node with key whose domain counts is
// without.
func (s *Snapshot) someDomainWithout(key string, counts map[string]int) bool {
	for _, nid := range s.liveNodes() {
		if d, ok := s.nodes[nid].node.Labels[key]; ok {
			if _, counted := counts[d]; !counted {
				return true
			}
		}
	}
	return false
}

func minCount(counts map[string]int) int {
	lowest := -1
	for _, c := range counts {
		if lowest < 0 || c < lowest {
			lowest = c
		}
	}
	return max(lowest, 0)
}
