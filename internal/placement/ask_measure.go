package placement

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/brief"
)

// Measurement is how the running pods of a workload stand against the
// constraint: not what the scheduler intended, but where the pods are.
type Measurement struct {
	// Holds is true when the placement satisfies the hard form of the
	// constraint.
	Holds bool
	// Counts are the selected pods per domain, eligible empty domains included.
	Counts map[string]int
	// Skew is the spread's measured skew; for anti-affinity the largest
	// number of selected pods sharing a domain with one of the workload's.
	Skew int
	// Summary says it in words, for conditions and events.
	Summary string
}

// Measure judges where a workload's bound pods are. For anti-affinity no
// selected pod may share a domain with one of the workload's pods; for a
// spread the pods the constraint counts, over the domains the scheduler
// counts (nodes with the key that the workload's pods may run on), may
// differ by at most maxSkew, with minDomains counted as the scheduler does.
func (s *Snapshot) Measure(w *Workload, c Constraint) (Measurement, error) {
	own := s.workloadPods(w.Pods)
	if len(own) == 0 {
		return Measurement{Holds: true, Counts: map[string]int{}, Summary: "no running pods to measure"}, nil
	}
	switch {
	case c.AntiAffinity != nil:
		return s.measureAntiAffinity(w, c.AntiAffinity, own)
	case c.Spread != nil:
		return s.measureSpread(w, c.Spread, own)
	}
	return Measurement{}, fmt.Errorf("measure %s: neither anti-affinity nor spread is set", w.Ref())
}

func (s *Snapshot) measureAntiAffinity(w *Workload, a *AntiAffinity, own []podID) (Measurement, error) {
	m := Measurement{Holds: true, Counts: map[string]int{}}
	var crowded []string
	for _, id := range own {
		pi := s.pods[id]
		// Only the pods of the live template carry the term: a partitioned
		// StatefulSet's ordinals below the partition keep the old one.
		if pi.node == noNode || !w.currentRevision(pi.common()) {
			continue
		}
		term, err := newAffinityTerm(pi.common(), ptrTo(a.AffinityTerm(w.Selector)))
		if err != nil {
			return m, fmt.Errorf("measure %s: %w", w.Ref(), err)
		}
		domain, ok := s.nodes[pi.node].node.Labels[a.TopologyKey]
		if !ok {
			continue
		}
		m.Counts[domain]++
		neighbours := 0
		for _, ns := range term.namespaces.UnsortedList() {
			for other := range s.labels.candidates(ns, term.selector) {
				op := s.pods[other]
				if other == id || op.node == noNode || op.terminating() || !term.matches(op.common(), namespaceLabels(s, ns)) {
					continue
				}
				if s.nodes[op.node].node.Labels[a.TopologyKey] == domain {
					neighbours++
				}
			}
		}
		if neighbours > 0 {
			m.Holds = false
			crowded = append(crowded, fmt.Sprintf("%s shares %s=%s with %d selected pod(s)", pi.name, a.TopologyKey, domain, neighbours))
		}
		if neighbours > m.Skew {
			m.Skew = neighbours
		}
	}
	sort.Strings(crowded)
	if m.Holds {
		m.Summary = fmt.Sprintf("every pod of %s is alone among the selected pods in its %s domain", w.Ref(), a.TopologyKey)
	} else {
		m.Summary = fmt.Sprintf("%s: %s", w.Ref(), brief.FirstFew(crowded, 3, ", "))
	}
	return m, nil
}

// measureSpread counts what the scheduler would count for the workload's
// next pod: the pods the applied spread selects once matchLabelKeys are
// resolved from a pod of the live template, so that a spread scoped to the
// new revision is judged over that revision's pods only.
func (s *Snapshot) measureSpread(w *Workload, sp *Spread, own []podID) (Measurement, error) {
	m := Measurement{Counts: map[string]int{}}
	ref := s.pods[own[0]].common()
	for _, id := range own {
		if p := s.pods[id].common(); w.currentRevision(p) {
			ref = p
			break
		}
	}
	tsc := sp.SpreadConstraint(w.Selector, pgv1.StageHard)
	term, err := newAffinityTerm(ref, &corev1.PodAffinityTerm{LabelSelector: tsc.LabelSelector, MatchLabelKeys: tsc.MatchLabelKeys, TopologyKey: tsc.TopologyKey})
	if err != nil {
		return m, fmt.Errorf("measure %s: %w", w.Ref(), err)
	}
	honourAffinity := policyOr(sp.NodeAffinityPolicy, corev1.NodeInclusionPolicyHonor) == corev1.NodeInclusionPolicyHonor
	honourTaints := policyOr(sp.NodeTaintsPolicy, corev1.NodeInclusionPolicyIgnore) == corev1.NodeInclusionPolicyHonor
	affinity := nodeaffinity.GetRequiredNodeAffinity(ref)
	for _, nid := range s.liveNodes() {
		node := s.nodes[nid].node
		domain, ok := node.Labels[sp.TopologyKey]
		if !ok {
			continue
		}
		if honourAffinity {
			if match, _ := affinity.Match(node); !match {
				continue
			}
		}
		if honourTaints {
			if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, ref.Spec.Tolerations, doNotSchedule, false); untolerated {
				continue
			}
		}
		if _, seen := m.Counts[domain]; !seen {
			m.Counts[domain] = 0
		}
	}
	counted := 0
	for other := range s.labels.candidates(ref.Namespace, term.selector) {
		op := s.pods[other]
		if op.node == noNode || op.terminating() || !term.matches(op.common(), namespaceLabels(s, ref.Namespace)) {
			continue
		}
		domain, ok := s.nodes[op.node].node.Labels[sp.TopologyKey]
		if _, eligible := m.Counts[domain]; ok && eligible {
			m.Counts[domain]++
			counted++
		}
	}
	lo, hi := -1, 0
	for _, n := range m.Counts {
		if lo < 0 || n < lo {
			lo = n
		}
		if n > hi {
			hi = n
		}
	}
	if lo < 0 || (sp.MinDomains != nil && len(m.Counts) < int(*sp.MinDomains)) {
		lo = 0
	}
	m.Skew = hi - lo
	maxSkew := int(max(sp.MaxSkew, 1))
	m.Holds = m.Skew <= maxSkew
	verb := "≤"
	if !m.Holds {
		verb = ">"
	}
	m.Summary = fmt.Sprintf("%s: measured skew %d %s maxSkew %d over %s (%s), counting the %d running pod(s) selected by %s",
		w.Ref(), m.Skew, verb, maxSkew, sp.TopologyKey, DescribeCounts(m.Counts), counted, describeSelector(term))
	return m, nil
}
