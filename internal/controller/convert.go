package controller

import (
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// constraintFromSpec converts the API's constraint into the engine's, which
// knows nothing of API versions.
func constraintFromSpec(c pgv1.Constraint) placement.Constraint {
	switch {
	case c.PodAntiAffinity != nil:
		a := c.PodAntiAffinity
		return placement.Constraint{AntiAffinity: &placement.AntiAffinity{
			TopologyKey:       a.TopologyKey,
			Selector:          a.LabelSelector,
			MatchLabelKeys:    a.MatchLabelKeys,
			Namespaces:        a.Namespaces,
			NamespaceSelector: a.NamespaceSelector,
		}}
	case c.TopologySpread != nil:
		s := c.TopologySpread
		return placement.Constraint{Spread: &placement.Spread{
			TopologyKey:        s.TopologyKey,
			MaxSkew:            s.MaxSkew,
			MinDomains:         s.MinDomains,
			Selector:           s.LabelSelector,
			MatchLabelKeys:     s.MatchLabelKeys,
			NodeAffinityPolicy: inclusionPolicy(s.NodeAffinityPolicy),
			NodeTaintsPolicy:   inclusionPolicy(s.NodeTaintsPolicy),
			AllRevisions:       s.RevisionScope != nil && *s.RevisionScope == pgv1.RevisionScopeAll,
		}}
	}
	return placement.Constraint{}
}

// inclusionPolicy leaves an unset policy unset, so that the written spread
// carries only what the user asked for and the scheduler applies its default.
func inclusionPolicy(p pgv1.InclusionPolicy) *corev1.NodeInclusionPolicy {
	if p == "" {
		return nil
	}
	v := corev1.NodeInclusionPolicy(p)
	return &v
}

// hazardsFromAnswer records the engine's findings in the API's form.
func hazardsFromAnswer(hs []placement.Hazard) []pgv1.Hazard {
	out := make([]pgv1.Hazard, 0, len(hs))
	for _, h := range hs {
		sev := pgv1.SeverityInfo
		if h.Blocking {
			sev = pgv1.SeverityBlocking
		}
		out = append(out, pgv1.Hazard{Type: h.Type, Severity: sev, Target: h.Workload, Message: truncate(h.Message, 2048)})
	}
	return out
}

// truncate keeps a message within the API's bound, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
