package planning

import (
	corev1 "k8s.io/api/core/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/brief"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// Bounds of the API's status fields the plan and the hazards are written to.
const (
	MaxHazards        = 16
	MaxHazardMessage  = 2048
	MaxChange         = 1024
	MaxPlacement      = 512
	MaxListedRecreate = 5
)

// ConstraintFromSpec converts the API's constraint into the engine's, which
// knows nothing of API versions.
func ConstraintFromSpec(c pgv1.Constraint) placement.Constraint {
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

// SpecFromConstraint is the engine's constraint in the API's form, the
// inverse of ConstraintFromSpec: how a constraint written straight into a
// workload is asked about as a migration's (JudgeChange), and how the Adopt
// mode names the migration that hardens one.
func SpecFromConstraint(c placement.Constraint) pgv1.Constraint {
	switch {
	case c.AntiAffinity != nil:
		a := c.AntiAffinity
		return pgv1.Constraint{PodAntiAffinity: &pgv1.PodAntiAffinityConstraint{
			TopologyKey:       a.TopologyKey,
			LabelSelector:     pgv1.SelectorFrom(a.Selector),
			MatchLabelKeys:    a.MatchLabelKeys,
			Namespaces:        a.Namespaces,
			NamespaceSelector: pgv1.SelectorFrom(a.NamespaceSelector),
		}}
	case c.Spread != nil:
		s := c.Spread
		out := &pgv1.TopologySpreadConstraint{
			TopologyKey:        s.TopologyKey,
			MaxSkew:            s.MaxSkew,
			MinDomains:         s.MinDomains,
			LabelSelector:      pgv1.SelectorFrom(s.Selector),
			MatchLabelKeys:     s.MatchLabelKeys,
			NodeAffinityPolicy: specPolicy(s.NodeAffinityPolicy),
			NodeTaintsPolicy:   specPolicy(s.NodeTaintsPolicy),
		}
		// A spread naming matchLabelKeys counts what they say whatever
		// the scope: the scope is written only where it decides.
		if s.AllRevisions && len(s.MatchLabelKeys) == 0 {
			all := pgv1.RevisionScopeAll
			out.RevisionScope = &all
		}
		return pgv1.Constraint{TopologySpread: out}
	}
	return pgv1.Constraint{}
}

func specPolicy(p *corev1.NodeInclusionPolicy) pgv1.InclusionPolicy {
	if p == nil {
		return ""
	}
	return pgv1.InclusionPolicy(*p)
}

// CapacityFromSpec converts the spec's capacity (nil for none) into the
// engine's.
func CapacityFromSpec(c *pgv1.Capacity) placement.CapacitySpec {
	if c == nil {
		return placement.CapacitySpec{}
	}
	return placement.CapacitySpec{NodeSelector: c.NodeSelector.AsMeta(), MinNodes: c.MinNodes, MinDomains: c.MinDomains}
}

// HazardsFromAnswer records the engine's findings in the API's form,
// within the API's bounds.
func HazardsFromAnswer(hs []placement.Hazard) []pgv1.Hazard {
	out := make([]pgv1.Hazard, 0, min(len(hs), MaxHazards))
	for _, h := range hs {
		if len(out) == MaxHazards {
			break
		}
		sev := pgv1.SeverityInfo
		if h.Blocking {
			sev = pgv1.SeverityBlocking
		}
		out = append(out, pgv1.Hazard{Type: h.Type, Severity: sev, Target: h.Workload.String(), Message: brief.Truncate(h.Message, MaxHazardMessage)})
	}
	return out
}
