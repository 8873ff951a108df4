package placement

import (
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// SoftWeight is the weight of the preferred anti-affinity term of the soft
// stage: the highest, so the preference outweighs the scheduler's other scores.
const SoftWeight int32 = 100

// Constraint is the placement constraint a migration adds, independent of
// the API version it came from.
type Constraint struct {
	AntiAffinity *AntiAffinity
	Spread       *Spread
}

// AntiAffinity keeps a workload's pods apart from the pods Selector selects.
type AntiAffinity struct {
	TopologyKey string
	// Selector defaults to the workload's own pod selector.
	Selector          *metav1.LabelSelector
	MatchLabelKeys    []string
	Namespaces        []string
	NamespaceSelector *metav1.LabelSelector
}

// Spread spreads a workload's pods over the domains of TopologyKey.
type Spread struct {
	TopologyKey string
	MaxSkew     int32
	// MinDomains applies to the hard stage only, as the API requires.
	MinDomains *int32
	// Selector defaults to the workload's own pod selector.
	Selector           *metav1.LabelSelector
	MatchLabelKeys     []string
	NodeAffinityPolicy *corev1.NodeInclusionPolicy
	NodeTaintsPolicy   *corev1.NodeInclusionPolicy
	// AllRevisions keeps a Deployment's spread counting every revision the
	// selector selects; see ForWorkload.
	AllRevisions bool
}

// RevisionScoped reports whether the spread counts only the pods of the
// revision being rolled out of a Deployment.
func (s *Spread) RevisionScoped() bool {
	return slices.Contains(s.MatchLabelKeys, appsv1.DefaultDeploymentUniqueLabelKey)
}

// TopologyKey is the key of whichever constraint is set.
func (c Constraint) TopologyKey() string {
	if c.AntiAffinity != nil {
		return c.AntiAffinity.TopologyKey
	}
	if c.Spread != nil {
		return c.Spread.TopologyKey
	}
	return ""
}

// Selector is the constraint's label selector, or own when it has none.
func (c Constraint) Selector(own *metav1.LabelSelector) *metav1.LabelSelector {
	var sel *metav1.LabelSelector
	switch {
	case c.AntiAffinity != nil:
		sel = c.AntiAffinity.Selector
	case c.Spread != nil:
		sel = c.Spread.Selector
	}
	if sel == nil {
		sel = own
	}
	return sel
}

// AffinityTerm is the anti-affinity term of the constraint.
func (a *AntiAffinity) AffinityTerm(own *metav1.LabelSelector) corev1.PodAffinityTerm {
	sel := a.Selector
	if sel == nil {
		sel = own
	}
	return corev1.PodAffinityTerm{
		LabelSelector:     sel.DeepCopy(),
		TopologyKey:       a.TopologyKey,
		MatchLabelKeys:    append([]string(nil), a.MatchLabelKeys...),
		Namespaces:        append([]string(nil), a.Namespaces...),
		NamespaceSelector: a.NamespaceSelector.DeepCopy(),
	}
}

// SpreadConstraint is the topologySpreadConstraints entry of the stage.
func (s *Spread) SpreadConstraint(own *metav1.LabelSelector, stage pgv1.Stage) corev1.TopologySpreadConstraint {
	sel := s.Selector
	if sel == nil {
		sel = own
	}
	maxSkew := s.MaxSkew
	if maxSkew < 1 {
		maxSkew = 1
	}
	c := corev1.TopologySpreadConstraint{
		MaxSkew:            maxSkew,
		TopologyKey:        s.TopologyKey,
		WhenUnsatisfiable:  corev1.ScheduleAnyway,
		LabelSelector:      sel.DeepCopy(),
		MatchLabelKeys:     append([]string(nil), s.MatchLabelKeys...),
		NodeAffinityPolicy: s.NodeAffinityPolicy,
		NodeTaintsPolicy:   s.NodeTaintsPolicy,
	}
	if stage == pgv1.StageHard {
		c.WhenUnsatisfiable = corev1.DoNotSchedule
		c.MinDomains = s.MinDomains
	}
	return c
}

// Short names the constraint's hard form in a few words, as a warning or
// an error about one of a template's constraints names it.
func (c Constraint) Short() string {
	if c.Spread != nil {
		return "DoNotSchedule spread on " + c.Spread.TopologyKey
	}
	return "required anti-affinity on " + c.TopologyKey()
}

// Describe says in words what moving a workload from stage from to stage to
// changes in its pod template, for the plan a person reviews.
func (c Constraint) Describe(from, to pgv1.Stage) string {
	what := c.describeForm(to)
	switch {
	case from == to:
		return "no change: the template already carries " + what
	case to == pgv1.StageNone:
		return "removes " + c.describeForm(from) + ", restoring the template as it was"
	case from == pgv1.StageNone:
		return "adds " + what
	default:
		return "replaces " + c.describeForm(from) + " with " + what
	}
}

func (c Constraint) describeForm(stage pgv1.Stage) string {
	switch {
	case c.AntiAffinity != nil:
		sel := "the workload's own pods"
		if c.AntiAffinity.Selector != nil {
			sel = "pods matching " + metav1.FormatLabelSelector(c.AntiAffinity.Selector)
		}
		if stage == pgv1.StageHard {
			return fmt.Sprintf("a required podAntiAffinity term keeping pods apart from %s per %s", sel, c.AntiAffinity.TopologyKey)
		}
		return fmt.Sprintf("a preferred podAntiAffinity term (weight %d) keeping pods apart from %s per %s", SoftWeight, sel, c.AntiAffinity.TopologyKey)
	case c.Spread != nil:
		sel := "the workload's own pods"
		if c.Spread.Selector != nil {
			sel = "pods matching " + metav1.FormatLabelSelector(c.Spread.Selector)
		}
		when := corev1.ScheduleAnyway
		if stage == pgv1.StageHard {
			when = corev1.DoNotSchedule
		}
		counting := ""
		switch {
		case c.Spread.RevisionScoped():
			counting = ", counting only the pods of the revision being rolled out (matchLabelKeys: [pod-template-hash])"
		case len(c.Spread.MatchLabelKeys) > 0:
			counting = fmt.Sprintf(", scoped by matchLabelKeys %v", c.Spread.MatchLabelKeys)
		}
		return fmt.Sprintf("a %s topologySpreadConstraint (maxSkew %d) spreading %s over %s%s", when, max(c.Spread.MaxSkew, 1), sel, c.Spread.TopologyKey, counting)
	}
	return "no constraint"
}
