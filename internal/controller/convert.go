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
			Selector:          a.LabelSelector.AsMeta(),
			MatchLabelKeys:    a.MatchLabelKeys,
			Namespaces:        a.Namespaces,
			NamespaceSelector: a.NamespaceSelector.AsMeta(),
		}}
	case c.TopologySpread != nil:
		s := c.TopologySpread
		return placement.Constraint{Spread: &placement.Spread{
			TopologyKey:        s.TopologyKey,
			MaxSkew:            s.MaxSkew,
			MinDomains:         s.MinDomains,
			Selector:           s.LabelSelector.AsMeta(),
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

// snapshotOf records an entry (a pod spec holding only our term or spread)
// in the API's form; nil for none.
func snapshotOf(entry *corev1.PodSpec) *pgv1.PlacementSnapshot {
	if entry == nil {
		return nil
	}
	snap := &pgv1.PlacementSnapshot{TopologySpreadConstraints: entry.TopologySpreadConstraints}
	if entry.Affinity != nil {
		snap.PodAntiAffinity = entry.Affinity.PodAntiAffinity
	}
	return snap
}

// entryOf is the inverse of snapshotOf.
func entryOf(snap *pgv1.PlacementSnapshot) *corev1.PodSpec {
	if snap == nil {
		return nil
	}
	entry := &corev1.PodSpec{TopologySpreadConstraints: snap.TopologySpreadConstraints}
	if snap.PodAntiAffinity != nil {
		entry.Affinity = &corev1.Affinity{PodAntiAffinity: snap.PodAntiAffinity}
	}
	return entry
}

// beforeOf records what a template carries of the fields the migration
// changes.
func beforeOf(spec *corev1.PodSpec) *pgv1.PlacementSnapshot {
	snap := &pgv1.PlacementSnapshot{TopologySpreadConstraints: spec.TopologySpreadConstraints}
	if spec.Affinity != nil && spec.Affinity.PodAntiAffinity != nil {
		snap.PodAntiAffinity = spec.Affinity.PodAntiAffinity.DeepCopy()
	}
	return snap
}

// hazardsFromAnswer records the engine's findings in the API's form,
// within the API's bounds.
func hazardsFromAnswer(hs []placement.Hazard) []pgv1.Hazard {
	out := make([]pgv1.Hazard, 0, len(hs))
	for _, h := range hs {
		if len(out) == 16 {
			break
		}
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
