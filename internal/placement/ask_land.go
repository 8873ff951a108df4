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
	// it picks the best of those, which may not be among Best.
	Sampled bool
}

// Land answers where the pod lands, scoring with the snapshot's profile;
// no node when none passes the filters (Schedule says why).
func (s *Snapshot) Land(pod *corev1.Pod) (Landing, error) {
	e, err := s.newEvaluator(pod)
	if err != nil {
		return Landing{}, err
	}
	sc, err := newScorer(e, s.profile, nil)
	if err != nil {
		return Landing{}, fmt.Errorf("scoring %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	feasible := e.feasible()
	totals, shares := sc.totals(feasible, true)
	out := Landing{Profile: s.profile.Name, Sampled: s.profile.sampled(len(e.order), len(feasible))}
	for _, i := range best(feasible, totals) {
		out.Best = append(out.Best, e.nodeName(i))
	}
	for k, i := range feasible {
		out.Ranking = append(out.Ranking, NodeScore{Node: e.nodeName(i), Total: totals[k], Plugins: shares[k]})
	}
	sort.SliceStable(out.Ranking, func(a, b int) bool { return out.Ranking[a].Total > out.Ranking[b].Total })
	return out, nil
}
