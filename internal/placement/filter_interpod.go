package placement

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
)

// initInterPod counts, per topology domain, the pods the incoming pod's
// required affinity and anti-affinity terms select, and the domains that
// existing pods' required anti-affinity forbids to it. Unlike the spread,
// inter-pod affinity counts terminating pods too: the scheduler does.
func (e *evaluator) initInterPod() error {
	anti, err := requiredAntiAffinityTerms(e.pod)
	if err != nil {
		return err
	}
	aff, err := requiredAffinityTerms(e.pod)
	if err != nil {
		return err
	}
	e.anti = e.countTerms(anti)
	e.affinity = e.countAffinity(aff)
	e.selfAffinity = true
	for i := range aff {
		if !aff[i].matches(e.pod, e.nsLabels) {
			e.selfAffinity = false
		}
	}

	// The counts of existing pods' terms, kept by the snapshot when no
	// entry is disregarded.
	key := ""
	if e.disregarded == nil {
		key = existingAntiKey(e.pod, e.nsLabels)
		if kept, ok := e.s.existingAnti[key]; ok {
			e.setExistingAnti(kept.clone())
			return nil
		}
	}
	e.existingAnti = map[string]*domainCounts{}
	for id := range e.s.withAntiAffinity {
		pi := e.s.pods[id]
		i := e.boundPos(pi)
		if i < 0 {
			continue
		}
		terms := pi.antiTerms()
		if p := pi.common(); e.disregards(p) {
			bare := &corev1.Pod{ObjectMeta: p.ObjectMeta, Spec: *WithoutEntry(&p.Spec, e.disregarded)}
			if terms, err = requiredAntiAffinityTerms(bare); err != nil {
				return err
			}
		}
		e.forbidFor(terms, i, 1)
	}
	if key != "" {
		e.s.keepExistingAnti(key, e.existingAnti)
	}
	return nil
}

// setExistingAnti takes counts as the evaluation's own.
func (e *evaluator) setExistingAnti(counts existingAntiCounts) {
	e.existingAnti = counts
	e.existingAntiList = e.existingAntiList[:0]
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		e.existingAntiList = append(e.existingAntiList, counts[k])
	}
}

// disregards reports whether p's copy of the disregarded entry is set
// aside: p carries it and is among the pods its terms keep apart (a pod of
// the constrained group). Another workload's identical term is its own
// rule and stays.
func (e *evaluator) disregards(p *corev1.Pod) bool {
	if e.disregarded == nil || e.disregarded.Affinity == nil || e.disregarded.Affinity.PodAntiAffinity == nil || !Carries(&p.Spec, e.disregarded) {
		return false
	}
	terms, err := buildTerms(p, e.disregarded.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
	if err != nil {
		return false
	}
	nsLabels := namespaceLabels(e.s, p.Namespace)
	for k := range terms {
		if !terms[k].matches(p, nsLabels) {
			return false
		}
	}
	return len(terms) > 0
}

func (e *evaluator) countTerms(terms []affinityTerm) []termCounts {
	out := make([]termCounts, len(terms))
	for k, t := range terms {
		out[k] = termCounts{term: t, domainCounts: *e.s.newDomainCounts(e.topologyFor(t.topologyKey))}
		for _, ns := range e.termNamespaces(&t) {
			for id := range e.s.labels.candidates(ns, t.selector) {
				pi := e.s.pods[id]
				i := e.boundPos(pi)
				if i < 0 || !t.selector.Matches(labels.Set(pi.common().Labels)) {
					continue
				}
				if d := out[k].topo.domainOf[i]; d >= 0 {
					out[k].counts[d]++
				}
			}
		}
	}
	return out
}

// countAffinity counts, per term and domain, the pods that match every one
// of the terms: the scheduler only counts a pod towards required affinity
// when it matches all of them.
func (e *evaluator) countAffinity(terms []affinityTerm) []termCounts {
	out := make([]termCounts, len(terms))
	for k, t := range terms {
		out[k] = termCounts{term: t, domainCounts: *e.s.newDomainCounts(e.topologyFor(t.topologyKey))}
	}
	if len(terms) == 0 {
		return out
	}
	first := &terms[0]
	for _, ns := range e.termNamespaces(first) {
		for id := range e.s.labels.candidates(ns, first.selector) {
			pi := e.s.pods[id]
			if i := e.boundPos(pi); i >= 0 {
				e.accountAffinity(out, pi.common(), i, 1)
			}
		}
	}
	return out
}

// accountAffinity records pod p, bound at position i, for every affinity
// term if it matches all of them.
func (e *evaluator) accountAffinity(counts []termCounts, p *corev1.Pod, i int, delta int32) {
	nsl := namespaceLabels(e.s, p.Namespace)
	for k := range counts {
		if !counts[k].term.matches(p, nsl) {
			return
		}
	}
	for k := range counts {
		if d := counts[k].topo.domainOf[i]; d >= 0 {
			counts[k].counts[d] += delta
			e.affinityTotal += int(delta)
			// The total decides whether the pod may start its group
			// anywhere: every node's verdict may change.
			clear(e.fitOK)
		}
	}
}

// termNamespaces lists the namespaces whose pods a term may select.
func (e *evaluator) termNamespaces(t *affinityTerm) []string {
	set := sets.New[string]()
	set.Insert(t.namespaces.UnsortedList()...)
	if t.hasNSSelector {
		for name, ns := range e.s.namespaces {
			if t.nsSelector.Matches(labels.Set(ns.Labels)) {
				set.Insert(name)
			}
		}
	}
	return sets.List(set)
}

// forbidFor records the domains the given anti-affinity terms, of a pod
// bound at position i, forbid to the incoming pod.
func (e *evaluator) forbidFor(terms []affinityTerm, i int, delta int32) {
	for k := range terms {
		t := &terms[k]
		if !t.matches(e.pod, e.nsLabels) {
			continue
		}
		dc, ok := e.existingAnti[t.topologyKey]
		if !ok {
			dc = e.s.newDomainCounts(e.topologyFor(t.topologyKey))
			e.existingAnti[t.topologyKey] = dc
			e.existingAntiList = append(e.existingAntiList, dc)
		}
		if d := dc.topo.domainOf[i]; d >= 0 {
			dc.counts[d] += delta
			e.forgetFitsOver(dc.topo)
		}
	}
}

func (e *evaluator) accountInterPod(p *corev1.Pod, antiTerms []affinityTerm, i int, delta int32) {
	pl := labels.Set(p.Labels)
	nsl := namespaceLabels(e.s, p.Namespace)
	for k := range e.anti {
		tc := &e.anti[k]
		if d := tc.topo.domainOf[i]; d >= 0 && (tc.term.namespaces.Has(p.Namespace) || tc.term.nsSelector.Matches(nsl)) && tc.term.selector.Matches(pl) {
			tc.counts[d] += delta
			e.forgetFitsOver(tc.topo)
		}
	}
	if len(e.affinity) > 0 {
		e.accountAffinity(e.affinity, p, i, delta)
	}
	e.forbidFor(antiTerms, i, delta)
}

// interPodReason is InterPodAffinity's Filter: the incoming pod's affinity,
// then its anti-affinity, then existing pods' anti-affinity.
func (e *evaluator) interPodReason(i int) string {
	if len(e.affinity) > 0 {
		podsExist := true
		for k := range e.affinity {
			d := e.affinity[k].topo.domainOf[i]
			if d < 0 {
				// Every topology key must be on the node, even for self-affinity.
				return ReasonAffinity
			}
			if e.affinity[k].counts[d] <= 0 {
				podsExist = false
			}
		}
		// A pod that matches its own affinity may start the group when no
		// pod anywhere matches yet.
		if !podsExist && !(e.affinityTotal == 0 && e.selfAffinity) {
			return ReasonAffinity
		}
	}
	for k := range e.anti {
		if d := e.anti[k].topo.domainOf[i]; d >= 0 && e.anti[k].counts[d] > 0 {
			return ReasonAntiAffinity
		}
	}
	for _, dc := range e.existingAntiList {
		if d := dc.topo.domainOf[i]; d >= 0 && dc.counts[d] > 0 {
			return ReasonExistingAntiAffinity
		}
	}
	return ""
}
