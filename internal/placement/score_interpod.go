package placement

import (
	"math"

	corev1 "k8s.io/api/core/v1"
)

// interPodScore is InterPodAffinity's score: per topology domain, the
// weights of the preferred terms that hold between the incoming pod and
// the pods there, both ways, and existing pods' required affinity terms
// that select the incoming pod, weighted by hardPodAffinityWeight.
// Terminating pods count, as in the filter.
type interPodScore struct {
	e    *evaluator
	hard int64
	// own are the incoming pod's preferred terms.
	own []weightedTerm
	// byKey are the domains' scores per topology key, and keys the same
	// in the order the keys came.
	byKey map[string]*keyScores
	keys  []*keyScores
	// terms caches a pod spec's scoring terms by its affinity, which the
	// pods of one template share.
	terms map[*corev1.Affinity]*scoringTerms
}

// newInterPodScore is nil when the plugin skips the pod: it has no
// preferred term and the profile ignores existing pods' preferred terms.
func newInterPodScore(e *evaluator, p *Profile) (*interPodScore, error) {
	own, err := podScoringTerms(e.pod)
	if err != nil {
		return nil, err
	}
	ip := &interPodScore{e: e, hard: p.HardPodAffinityWeight, byKey: map[string]*keyScores{}, terms: map[*corev1.Affinity]*scoringTerms{}}
	if own != nil {
		ip.own = own.preferred
	}
	if p.IgnorePreferredTermsOfExistingPods && len(ip.own) == 0 {
		return nil, nil
	}
	ip.countExisting()
	return ip, nil
}

// countExisting adds the existing pods' share: every pod's that one of
// the incoming pod's terms selects, and every pod's whose own terms do.
func (ip *interPodScore) countExisting() {
	e := ip.e
	seen := map[podID]bool{}
	for _, t := range ip.own {
		for _, ns := range e.termNamespaces(&t.affinityTerm) {
			for id := range e.s.labels.candidates(ns, t.selector) {
				seen[id] = true
			}
		}
	}
	for id := range e.s.withScoringTerms {
		seen[id] = true
	}
	for id := range seen {
		pi := e.s.pods[id]
		if i := e.boundPos(pi); i >= 0 {
			ip.add(pi.common(), pi.scoring(), i, 1)
		}
	}
}

// account counts pod p bound to (1) or removed from (-1) position i.
func (ip *interPodScore) account(p *corev1.Pod, i int, delta int32) {
	ip.add(p, ip.termsOf(p), i, int64(delta))
}

func (ip *interPodScore) termsOf(p *corev1.Pod) *scoringTerms {
	a := p.Spec.Affinity
	if a == nil {
		return nil
	}
	if t, ok := ip.terms[a]; ok {
		return t
	}
	// A pod the snapshot took in has parsed already; a simulated one
	// shares its template's.
	t, err := podScoringTerms(p)
	if err != nil {
		t = nil
	}
	ip.terms[a] = t
	return t
}

// add is processExistingPod: the terms between the incoming pod and the
// pod p at position i, added to the domains of p's node.
func (ip *interPodScore) add(p *corev1.Pod, terms *scoringTerms, i int, sign int64) {
	e := ip.e
	// Nothing to add is known without reading the node.
	if len(ip.own) == 0 && terms == nil || len(e.node(e.order[i]).Labels) == 0 {
		return
	}
	if len(ip.own) > 0 {
		pNS := namespaceLabels(e.s, p.Namespace)
		for k := range ip.own {
			if ip.own[k].matches(p, pNS) {
				ip.addTo(ip.own[k].topologyKey, i, sign*ip.own[k].weight)
			}
		}
	}
	if terms == nil {
		return
	}
	if ip.hard > 0 {
		for k := range terms.requiredAffinity {
			if terms.requiredAffinity[k].matches(e.pod, e.nsLabels) {
				ip.addTo(terms.requiredAffinity[k].topologyKey, i, sign*ip.hard)
			}
		}
	}
	for k := range terms.preferred {
		if terms.preferred[k].matches(e.pod, e.nsLabels) {
			ip.addTo(terms.preferred[k].topologyKey, i, sign*terms.preferred[k].weight)
		}
	}
}

// keyScores are the domains' scores of one topology key.
type keyScores struct {
	topo   *topology
	scores []int64
}

func (ip *interPodScore) addTo(key string, i int, w int64) {
	ks, ok := ip.byKey[key]
	if !ok {
		t := ip.e.topologyFor(key)
		ks = &keyScores{topo: t, scores: make([]int64, len(t.names))}
		ip.byKey[key] = ks
		ip.keys = append(ip.keys, ks)
	}
	if d := ks.topo.domainOf[i]; d >= 0 {
		ks.scores[d] += w
	}
}

// scoresAny reports whether a term has held anywhere: until one does,
// every node scores 0.
func (ip *interPodScore) scoresAny() bool { return len(ip.keys) > 0 }

func (ip *interPodScore) score(i int) int64 {
	var n int64
	for _, ks := range ip.keys {
		if d := ks.topo.domainOf[i]; d >= 0 {
			n += ks.scores[d]
		}
	}
	return n
}

// normalizeMinMax maps the scores from their least to their most onto 0 to 100;
// equal scores are all 0.
func normalizeMinMax(scores []int64) {
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, s := range scores {
		lo, hi = min(lo, s), max(hi, s)
	}
	for k, s := range scores {
		f := 0.0
		if hi > lo {
			f = float64(maxNodeScore) * (float64(s-lo) / float64(hi-lo))
		}
		scores[k] = int64(f)
	}
}
