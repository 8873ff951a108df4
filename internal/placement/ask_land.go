package placement

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// Landing is where the scheduler puts a pod: Best are the nodes of the
// highest total score, of which it picks one at random, and Ranking every
// node that passes the filters with its score, the best first.
type Landing struct {
	// Profile is the scheduler profile assumed.
	Profile string
	Best    []string
	Ranking []NodeScore
	// Sampled says that the scheduler scores only some of the feasible
	// nodes (percentageOfNodesToScore), from where its last cycle stopped:
	// it picks the best of those, which may not be among Best. Possible
	// are then the nodes it can pick from some starting point: each that
	// scores at least as high as enough others to fill a sample with it
	// on top (scored over all the feasible nodes: a sample's own
	// normalization can move the nodes near that line). Zone is the zone
	// every possible node is in, "" when they are in several: what
	// depends on the domain stays exact.
	Sampled  bool
	Possible []string
	Zone     string
}

// Land answers where the pod lands, scoring with the profile it names;
// no node when none passes the filters (Schedule says why).
func (s *Snapshot) Land(pod *corev1.Pod) (Landing, error) {
	e, err := s.newEvaluator(pod)
	if err != nil {
		return Landing{}, err
	}
	sc, err := newScorer(e, e.profile, nil)
	if err != nil {
		return Landing{}, fmt.Errorf("scoring %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	feasible := e.feasible()
	totals, shares := sc.totals(feasible, true)
	out := Landing{Profile: e.profile.Name, Sampled: e.profile.sampled(len(e.order), len(feasible))}
	for _, i := range best(feasible, totals) {
		out.Best = append(out.Best, e.nodeName(i))
	}
	for k, i := range feasible {
		out.Ranking = append(out.Ranking, NodeScore{Node: e.nodeName(i), Total: totals[k], Plugins: shares[k]})
	}
	sort.SliceStable(out.Ranking, func(a, b int) bool { return out.Ranking[a].Total > out.Ranking[b].Total })
	if out.Sampled {
		out.Possible, out.Zone = s.possibleUnderSampling(out.Ranking, e.profile.feasibleNodesToFind(len(e.order)))
	}
	return out, nil
}

// possibleUnderSampling are the nodes of ranking (the best first) that top
// some sample of sample feasible nodes: those with at least sample-1
// others scoring no higher; and their zone when they share one.
func (s *Snapshot) possibleUnderSampling(ranking []NodeScore, sample int) ([]string, string) {
	var possible []string
	zone, shared := "", true
	for k, r := range ranking {
		below := len(ranking) - 1 - k
		// Nodes tied with r count below it too.
		for j := k - 1; j >= 0 && ranking[j].Total == r.Total; j-- {
			below++
		}
		if below < sample-1 {
			break
		}
		possible = append(possible, r.Node)
		n, _ := s.Node(r.Node)
		z := n.Labels[corev1.LabelTopologyZone]
		if len(possible) == 1 {
			zone = z
		} else if z != zone {
			shared = false
		}
	}
	if !shared {
		zone = ""
	}
	return possible, zone
}
