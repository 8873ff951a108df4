package placement

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// spreadScore is PodTopologySpread's score: per ScheduleAnyway constraint
// (the pod's, or the profile's defaults for a pod without any), the
// selected pods in the node's domain weighted by the log of the number of
// domains, fewer is better.
type spreadScore struct {
	e           *evaluator
	constraints []*softSpread
	// requireAll leaves out of scoring a node without every constraint's
	// key (always, but for the system's defaults).
	requireAll bool
}

// softSpread is one scoring constraint and its counts of selected pods:
// per domain over the nodes whose pods count, and per node for the
// hostname key, which counts every node's own.
type softSpread struct {
	c        spreadConstraint
	topo     *topology
	hostname bool
	// counted marks the positions whose pods count in their domain.
	counted []bool
	// counts are per slot (slotOf) or, for hostname, per position.
	counts []int64
}

// newSpreadScore is nil when the pod has no scoring constraint: the
// plugin skips it. owner is the selector of a simulated pod's controller.
func newSpreadScore(e *evaluator, p *Profile, owner labels.Selector) (*spreadScore, error) {
	constraints, err := softSpreadConstraints(e.pod)
	if err != nil {
		return nil, err
	}
	sp := &spreadScore{e: e, requireAll: len(e.pod.Spec.TopologySpreadConstraints) > 0 || !p.SystemDefaulted}
	if len(e.pod.Spec.TopologySpreadConstraints) == 0 {
		if constraints, err = e.defaultSpread(p, owner); err != nil {
			return nil, err
		}
	}
	if len(constraints) == 0 || len(e.order) == 0 {
		return nil, nil
	}
	for _, c := range constraints {
		sp.constraints = append(sp.constraints, sp.count(c))
	}
	return sp, nil
}

// defaultSpread are the profile's default constraints for the pod, with
// the selector of what owns it; none when nothing does.
func (e *evaluator) defaultSpread(p *Profile, owner labels.Selector) ([]spreadConstraint, error) {
	constraints, err := spreadConstraintsOf(e.pod, p.DefaultSpread, corev1.ScheduleAnyway)
	if err != nil || len(constraints) == 0 {
		return nil, err
	}
	sel := e.s.defaultSelector(e.pod, owner)
	if sel.Empty() {
		return nil, nil
	}
	for k := range constraints {
		constraints[k].selector = sel
	}
	return constraints, nil
}

func (sp *spreadScore) count(c spreadConstraint) *softSpread {
	e := sp.e
	ss := &softSpread{c: c, topo: e.topologyFor(c.topologyKey), hostname: c.topologyKey == corev1.LabelHostname, counted: make([]bool, len(e.order))}
	if ss.hostname {
		ss.counts = make([]int64, len(e.order))
	} else {
		ss.counts = make([]int64, len(ss.topo.names)+1)
	}
	for i, id := range e.order {
		if sp.requireAll && sp.lacksKey(i) || !e.includes(c, i, id) {
			continue
		}
		ss.counted[i] = true
	}
	if c.selector.Empty() {
		return ss
	}
	for id := range e.s.labels.candidates(e.pod.Namespace, c.selector) {
		pi := e.s.pods[id]
		if i := e.boundPos(pi); i >= 0 && !pi.terminating() && c.selector.Matches(labels.Set(pi.labels())) {
			ss.add(i, 1)
		}
	}
	return ss
}

// add counts a selected pod at position i.
func (ss *softSpread) add(i int, delta int64) {
	switch {
	case ss.hostname:
		ss.counts[i] += delta
	case ss.counted[i]:
		ss.counts[ss.topo.slotOf(i)] += delta
	}
}

// lacksKey reports whether the node at position i lacks a constraint's key.
func (sp *spreadScore) lacksKey(i int) bool {
	for _, ss := range sp.constraints {
		if ss.topo.domainOf[i] < 0 {
			return true
		}
	}
	return false
}

// account counts pod p bound to (1) or removed from (-1) position i.
func (sp *spreadScore) account(p *corev1.Pod, terminating bool, i int, delta int32) {
	if terminating || p.Namespace != sp.e.pod.Namespace {
		return
	}
	pl := labels.Set(p.Labels)
	for _, ss := range sp.constraints {
		if !ss.c.selector.Empty() && ss.c.selector.Matches(pl) {
			ss.add(i, int64(delta))
		}
	}
}

// scores writes the raw scores of the nodes at positions into out, and
// marks the nodes left out of scoring.
func (sp *spreadScore) scores(positions []int, out []int64, ignored []bool) {
	weights := make([]float64, len(sp.constraints))
	kept := 0
	for k := range positions {
		ignored[k] = sp.requireAll && sp.lacksKey(positions[k])
		if !ignored[k] {
			kept++
		}
	}
	for c, ss := range sp.constraints {
		size := kept
		if !ss.hostname {
			size = ss.domainsAmong(positions, ignored)
		}
		weights[c] = math.Log(float64(size + 2))
	}
	for k, i := range positions {
		if ignored[k] {
			out[k] = 0
			continue
		}
		var score float64
		for c, ss := range sp.constraints {
			if ss.topo.domainOf[i] < 0 {
				continue
			}
			var cnt int64
			if ss.hostname {
				cnt = ss.counts[i]
			} else {
				cnt = ss.counts[ss.topo.slotOf(i)]
			}
			score += float64(cnt)*weights[c] + float64(ss.c.maxSkew-1)
		}
		out[k] = int64(math.Round(score))
	}
}

// domainsAmong counts the distinct values of the constraint's key on the
// nodes scored, a node without the key having the empty one.
func (ss *softSpread) domainsAmong(positions []int, ignored []bool) int {
	seen := make([]bool, len(ss.topo.names)+1)
	n := 0
	for k, i := range positions {
		if ignored[k] {
			continue
		}
		if s := ss.topo.slotOf(i); !seen[s] {
			seen[s], n = true, n+1
		}
	}
	return n
}

// normalize turns raw scores around, fewer pods scoring higher, the nodes
// left out scoring 0.
func (sp *spreadScore) normalize(scores []int64, ignored []bool) {
	minScore, maxScore := int64(math.MaxInt64), int64(0)
	for k, s := range scores {
		if ignored[k] {
			continue
		}
		minScore, maxScore = min(minScore, s), max(maxScore, s)
	}
	for k, s := range scores {
		switch {
		case ignored[k]:
			scores[k] = 0
		case maxScore == 0:
			scores[k] = maxNodeScore
		default:
			scores[k] = maxNodeScore * (maxScore + minScore - s) / maxScore
		}
	}
}
