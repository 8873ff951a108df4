package placement

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// spreadState is one DoNotSchedule constraint of the incoming pod: which
// nodes count, and how many selected pods each domain holds.
type spreadState struct {
	c         spreadConstraint
	selfMatch int32
	// eligible marks the nodes whose pods and domains count: they carry
	// every hard constraint's topology key and pass the inclusion policies.
	eligible []bool
	domainCounts
	// present marks the domains that have at least one eligible node.
	present    []bool
	numDomains int
	min        int32
	minDirty   bool
	// verdict remembers, per domain, whether a pod there keeps the skew
	// (1) or not (2), 0 not known yet: a placement asks it of every node
	// while the counts stay; any change to them forgets every verdict.
	verdict []uint8
}

// initSpreads is PodTopologySpread's PreFilter.
// https://kubernetes.io/docs/concepts/scheduling-eviction/topology-spread-constraints/
func (e *evaluator) initSpreads() error {
	constraints, err := hardSpreadConstraints(e.pod)
	if err != nil || len(constraints) == 0 {
		return err
	}
	topos := make([]*topology, len(constraints))
	for k, c := range constraints {
		topos[k] = e.topologyFor(c.topologyKey)
	}
	var hasAllKeys []bool
	podLabels := labels.Set(e.pod.Labels)
	for k, c := range constraints {
		t := topos[k]
		key := spreadEligibilityKey(constraints, c)
		el := e.filters.spreads[key]
		if el == nil {
			if hasAllKeys == nil {
				hasAllKeys = e.nodesWithEveryKey(topos)
			}
			el = e.eligibility(c, t, hasAllKeys)
			// Bounded as the filters are: a tenant's workloads may name
			// any number of keys.
			if e.filters.spreads == nil || len(e.filters.spreads) >= maxSpreadEligibilities {
				e.filters.spreads = map[string]*spreadEligibility{}
			}
			e.filters.spreads[key] = el
		}
		st := &spreadState{
			c:            c,
			eligible:     el.eligible,
			domainCounts: *e.s.newDomainCounts(t),
			present:      el.present,
			numDomains:   el.numDomains,
			minDirty:     true,
		}
		if c.selector.Matches(podLabels) {
			st.selfMatch = 1
		}
		// An empty selector counts no pod, as in the scheduler.
		if !c.selector.Empty() {
			for id := range e.s.labels.candidates(e.pod.Namespace, c.selector) {
				pi := e.s.pods[id]
				i := e.boundPos(pi)
				if i < 0 || !st.eligible[i] || pi.terminating() || !c.selector.Matches(labels.Set(pi.labels())) {
					continue
				}
				st.counts[t.domainOf[i]]++
			}
		}
		e.spreads = append(e.spreads, st)
	}
	return nil
}

// includes reports whether c's inclusion policies count the node at
// position i: the filter's and the score's alike.
func (e *evaluator) includes(c spreadConstraint, i int, id nodeID) bool {
	if c.nodeAffinityPolicy == corev1.NodeInclusionPolicyHonor && !e.affinityOK[i] {
		return false
	}
	return c.nodeTaintsPolicy != corev1.NodeInclusionPolicyHonor || toleratesAll(e.pod, e.node(id))
}

// spreadEligibilityKey is what c's eligibility reads beside the
// template's node filters: every hard constraint's key, c's own, and its
// inclusion policies.
func spreadEligibilityKey(constraints []spreadConstraint, c spreadConstraint) string {
	var b strings.Builder
	for _, o := range constraints {
		b.WriteString(o.topologyKey)
		b.WriteByte(0)
	}
	b.WriteByte(1)
	b.WriteString(c.topologyKey)
	b.WriteByte(0)
	b.WriteString(string(c.nodeAffinityPolicy))
	b.WriteByte(0)
	b.WriteString(string(c.nodeTaintsPolicy))
	return b.String()
}

// nodesWithEveryKey marks the positions whose node carries every one of
// the topologies' keys: a node without all of them counts for none.
func (e *evaluator) nodesWithEveryKey(topos []*topology) []bool {
	has := make([]bool, len(e.order))
	for i := range e.order {
		has[i] = true
		for _, t := range topos {
			if t.domainOf[i] < 0 {
				has[i] = false
				break
			}
		}
	}
	return has
}

// eligibility is which nodes constraint c over topology t counts.
func (e *evaluator) eligibility(c spreadConstraint, t *topology, hasAllKeys []bool) *spreadEligibility {
	el := &spreadEligibility{eligible: make([]bool, len(e.order)), present: make([]bool, len(t.names))}
	for i, id := range e.order {
		if !hasAllKeys[i] || !e.includes(c, i, id) {
			continue
		}
		el.eligible[i] = true
		if d := t.domainOf[i]; !el.present[d] {
			el.present[d] = true
			el.numDomains++
		}
	}
	return el
}

// minMatch is the global minimum: the fewest selected pods in any domain, or
// 0 while there are fewer domains than minDomains.
func (st *spreadState) minMatch() int32 {
	if st.numDomains < st.c.minDomains {
		return 0
	}
	if st.minDirty {
		first := true
		for d, ok := range st.present {
			if ok && (first || st.counts[d] < st.min) {
				st.min, first = st.counts[d], false
			}
		}
		st.minDirty = false
	}
	return st.min
}

// spreadReason is PodTopologySpread's Filter: existing matching pods in the
// node's domain, plus the pod itself if it matches, minus the global
// minimum, must not exceed maxSkew.
func (e *evaluator) spreadReason(i int) string {
	for _, st := range e.spreads {
		d := st.topo.domainOf[i]
		if d < 0 {
			return ReasonSpreadMissingLabel
		}
		if !st.keepsSkew(d) {
			return ReasonSpread
		}
	}
	return ""
}

// keepsSkew reports whether one more selected pod in domain d keeps the
// skew within maxSkew.
func (st *spreadState) keepsSkew(d int32) bool {
	// The remembered verdict is read inline: a search asks it for every node.
	if int(d) < len(st.verdict) {
		if v := st.verdict[d]; v != 0 {
			return v == 1
		}
	}
	return st.judgeSkew(d)
}

// judgeSkew decides keepsSkew for domain d and remembers the verdict until
// the counts change.
func (st *spreadState) judgeSkew(d int32) bool {
	if st.verdict == nil {
		st.verdict = make([]uint8, len(st.present))
	}
	var match int32
	if st.present[d] {
		match = st.counts[d]
	}
	ok := int(match+st.selfMatch-st.minMatch()) <= st.c.maxSkew
	st.verdict[d] = 2
	if ok {
		st.verdict[d] = 1
	}
	return ok
}

func (e *evaluator) accountSpread(p *corev1.Pod, i int, delta int32) {
	if len(e.spreads) == 0 || p.Namespace != e.pod.Namespace {
		return
	}
	pl := labels.Set(p.Labels)
	for _, st := range e.spreads {
		if !st.eligible[i] || st.c.selector.Empty() || !st.c.selector.Matches(pl) {
			continue
		}
		st.counts[st.topo.domainOf[i]] += delta
		st.minDirty = true
		clear(st.verdict)
	}
}
