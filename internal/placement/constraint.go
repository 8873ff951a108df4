package placement

import (
	"fmt"
	"reflect"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Stage is the strength a constraint is applied at.
type Stage string

const (
	StageNone Stage = "None"
	StageSoft Stage = "Soft"
	StageHard Stage = "Hard"
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

// ForWorkload renders the constraint for one kind of workload. A spread on
// a Deployment that names no matchLabelKeys counts only the revision being
// rolled out (matchLabelKeys: [pod-template-hash]) unless AllRevisions is
// set: the old revision's pods, counted while they still run, are removed
// by the rollout, so a rollout legal at every step can end skewed
// (kubernetes#98215, KEP-3243). A StatefulSet replaces each pod in place,
// and its pods below a partition or under OnDelete keep the old revision:
// counting every revision is what keeps its end state within maxSkew, so it
// is left as written.
func (c Constraint) ForWorkload(kind WorkloadKind) Constraint {
	if c.Spread == nil || kind != Deployment || len(c.Spread.MatchLabelKeys) > 0 || c.Spread.AllRevisions {
		return c
	}
	scoped := *c.Spread
	scoped.MatchLabelKeys = []string{appsv1.DefaultDeploymentUniqueLabelKey}
	return Constraint{Spread: &scoped}
}

// RenderFor renders the constraint for w, one of the workloads a migration
// targets together. A spread whose selector also selects another target's
// pods counts the set together (incident 004: controllers spread over
// nodes by a shared part-of label), and scoping it to one revision would
// count each workload alone, so it is written as given.
func (c Constraint) RenderFor(w *Workload, all []*Workload) Constraint {
	if c.Spread == nil || c.Spread.Selector == nil {
		return c.ForWorkload(w.Kind)
	}
	sel, err := metav1.LabelSelectorAsSelector(c.Spread.Selector)
	if err != nil {
		return c
	}
	for _, other := range all {
		if other != w && sel.Matches(labels.Set(other.Template.Labels)) {
			return c
		}
	}
	return c.ForWorkload(w.Kind)
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
func (s *Spread) SpreadConstraint(own *metav1.LabelSelector, stage Stage) corev1.TopologySpreadConstraint {
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
	if stage == StageHard {
		c.WhenUnsatisfiable = corev1.DoNotSchedule
		c.MinDomains = s.MinDomains
	}
	return c
}

// Apply returns a copy of spec with the constraint at stage, and without the
// constraint at any other stage: soft to hard replaces our soft entry rather
// than adding a second one, and StageNone removes ours. Every other term and
// constraint is kept as it is.
func (c Constraint) Apply(spec *corev1.PodSpec, own *metav1.LabelSelector, stage Stage) (*corev1.PodSpec, error) {
	out := spec.DeepCopy()
	switch {
	case c.AntiAffinity != nil:
		applyAntiAffinity(out, c.AntiAffinity.AffinityTerm(own), stage)
	case c.Spread != nil:
		applySpread(out, c.Spread, own, stage)
	default:
		return nil, fmt.Errorf("apply constraint: neither anti-affinity nor spread is set")
	}
	return out, nil
}

func applyAntiAffinity(spec *corev1.PodSpec, term corev1.PodAffinityTerm, stage Stage) {
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	if spec.Affinity.PodAntiAffinity == nil {
		spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{}
	}
	paa := spec.Affinity.PodAntiAffinity
	paa.RequiredDuringSchedulingIgnoredDuringExecution = without(paa.RequiredDuringSchedulingIgnoredDuringExecution, func(t corev1.PodAffinityTerm) bool {
		return equalTerm(t, term)
	})
	paa.PreferredDuringSchedulingIgnoredDuringExecution = without(paa.PreferredDuringSchedulingIgnoredDuringExecution, func(t corev1.WeightedPodAffinityTerm) bool {
		return t.Weight == SoftWeight && equalTerm(t.PodAffinityTerm, term)
	})
	switch stage {
	case StageSoft:
		paa.PreferredDuringSchedulingIgnoredDuringExecution = append(paa.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.WeightedPodAffinityTerm{Weight: SoftWeight, PodAffinityTerm: term})
	case StageHard:
		paa.RequiredDuringSchedulingIgnoredDuringExecution = append(paa.RequiredDuringSchedulingIgnoredDuringExecution, term)
	}
	if len(paa.RequiredDuringSchedulingIgnoredDuringExecution) == 0 && len(paa.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		spec.Affinity.PodAntiAffinity = nil
	}
	if reflect.DeepEqual(*spec.Affinity, corev1.Affinity{}) {
		spec.Affinity = nil
	}
}

func applySpread(spec *corev1.PodSpec, s *Spread, own *metav1.LabelSelector, stage Stage) {
	soft, hard := s.SpreadConstraint(own, StageSoft), s.SpreadConstraint(own, StageHard)
	spec.TopologySpreadConstraints = without(spec.TopologySpreadConstraints, func(c corev1.TopologySpreadConstraint) bool {
		return equalSpread(c, soft) || equalSpread(c, hard)
	})
	switch stage {
	case StageSoft:
		spec.TopologySpreadConstraints = append(spec.TopologySpreadConstraints, soft)
	case StageHard:
		spec.TopologySpreadConstraints = append(spec.TopologySpreadConstraints, hard)
	}
	if len(spec.TopologySpreadConstraints) == 0 {
		spec.TopologySpreadConstraints = nil
	}
}

// StageOf reports the stage at which spec carries the constraint: Hard if
// it has the hard form, else Soft if it has the soft form, else None.
func (c Constraint) StageOf(spec *corev1.PodSpec, own *metav1.LabelSelector) Stage {
	switch {
	case c.AntiAffinity != nil:
		term := c.AntiAffinity.AffinityTerm(own)
		if spec.Affinity == nil || spec.Affinity.PodAntiAffinity == nil {
			return StageNone
		}
		for _, t := range spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			if equalTerm(t, term) {
				return StageHard
			}
		}
		for _, t := range spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			if t.Weight == SoftWeight && equalTerm(t.PodAffinityTerm, term) {
				return StageSoft
			}
		}
	case c.Spread != nil:
		soft, hard := c.Spread.SpreadConstraint(own, StageSoft), c.Spread.SpreadConstraint(own, StageHard)
		stage := StageNone
		for _, tsc := range spec.TopologySpreadConstraints {
			if equalSpread(tsc, hard) {
				return StageHard
			}
			if equalSpread(tsc, soft) {
				stage = StageSoft
			}
		}
		return stage
	}
	return StageNone
}

func without[T any](list []T, drop func(T) bool) []T {
	out := list[:0:0]
	for _, x := range list {
		if !drop(x) {
			out = append(out, x)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Describe says in words what moving a workload from stage from to stage to
// changes in its pod template, for the plan a person reviews.
func (c Constraint) Describe(from, to Stage) string {
	what := c.describeForm(to)
	switch {
	case from == to:
		return "no change: the template already carries " + what
	case to == StageNone:
		return "removes " + c.describeForm(from) + ", restoring the template as it was"
	case from == StageNone:
		return "adds " + what
	default:
		return "replaces " + c.describeForm(from) + " with " + what
	}
}

func (c Constraint) describeForm(stage Stage) string {
	switch {
	case c.AntiAffinity != nil:
		sel := "the workload's own pods"
		if c.AntiAffinity.Selector != nil {
			sel = "pods matching " + metav1.FormatLabelSelector(c.AntiAffinity.Selector)
		}
		if stage == StageHard {
			return fmt.Sprintf("a required podAntiAffinity term keeping pods apart from %s per %s", sel, c.AntiAffinity.TopologyKey)
		}
		return fmt.Sprintf("a preferred podAntiAffinity term (weight %d) keeping pods apart from %s per %s", SoftWeight, sel, c.AntiAffinity.TopologyKey)
	case c.Spread != nil:
		sel := "the workload's own pods"
		if c.Spread.Selector != nil {
			sel = "pods matching " + metav1.FormatLabelSelector(c.Spread.Selector)
		}
		when := corev1.ScheduleAnyway
		if stage == StageHard {
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

// Entry is what the stage writes into a template: a pod spec holding only
// the constraint's term or spread; nil for StageNone.
func (c Constraint) Entry(own *metav1.LabelSelector, stage Stage) (*corev1.PodSpec, error) {
	if stage == StageNone {
		return nil, nil
	}
	return c.Apply(&corev1.PodSpec{}, own, stage)
}

// Carries reports whether spec holds every anti-affinity term and spread
// constraint of entry, compared as the API server stores them. A nil entry
// is carried by every spec.
func Carries(spec, entry *corev1.PodSpec) bool {
	if entry == nil {
		return true
	}
	for _, want := range entry.TopologySpreadConstraints {
		if !slices.ContainsFunc(spec.TopologySpreadConstraints, func(c corev1.TopologySpreadConstraint) bool { return equalSpread(c, want) }) {
			return false
		}
	}
	if entry.Affinity == nil || entry.Affinity.PodAntiAffinity == nil {
		return true
	}
	var have corev1.PodAntiAffinity
	if spec.Affinity != nil && spec.Affinity.PodAntiAffinity != nil {
		have = *spec.Affinity.PodAntiAffinity
	}
	for _, want := range entry.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if !slices.ContainsFunc(have.RequiredDuringSchedulingIgnoredDuringExecution, func(t corev1.PodAffinityTerm) bool { return equalTerm(t, want) }) {
			return false
		}
	}
	for _, want := range entry.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
		if !slices.ContainsFunc(have.PreferredDuringSchedulingIgnoredDuringExecution, func(t corev1.WeightedPodAffinityTerm) bool {
			return t.Weight == want.Weight && equalTerm(t.PodAffinityTerm, want.PodAffinityTerm)
		}) {
			return false
		}
	}
	return true
}

// StageOfEntry is the stage an entry written by Entry stands for.
func StageOfEntry(entry *corev1.PodSpec) Stage {
	switch {
	case entry == nil:
		return StageNone
	case len(entry.TopologySpreadConstraints) > 0:
		if entry.TopologySpreadConstraints[0].WhenUnsatisfiable == corev1.DoNotSchedule {
			return StageHard
		}
		return StageSoft
	case entry.Affinity != nil && entry.Affinity.PodAntiAffinity != nil:
		if len(entry.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			return StageHard
		}
		return StageSoft
	}
	return StageNone
}

// ConstraintOf recovers, from an entry written by Entry, the constraint it
// was rendered from: what Measure and the verification of a recorded
// operation need, whatever the spec says now.
func ConstraintOf(entry *corev1.PodSpec) Constraint {
	if entry == nil {
		return Constraint{}
	}
	if len(entry.TopologySpreadConstraints) > 0 {
		t := entry.TopologySpreadConstraints[0]
		return Constraint{Spread: &Spread{TopologyKey: t.TopologyKey, MaxSkew: t.MaxSkew, MinDomains: t.MinDomains, Selector: t.LabelSelector,
			MatchLabelKeys: t.MatchLabelKeys, NodeAffinityPolicy: t.NodeAffinityPolicy, NodeTaintsPolicy: t.NodeTaintsPolicy}}
	}
	if entry.Affinity == nil || entry.Affinity.PodAntiAffinity == nil {
		return Constraint{}
	}
	var term corev1.PodAffinityTerm
	switch paa := entry.Affinity.PodAntiAffinity; {
	case len(paa.RequiredDuringSchedulingIgnoredDuringExecution) > 0:
		term = paa.RequiredDuringSchedulingIgnoredDuringExecution[0]
	case len(paa.PreferredDuringSchedulingIgnoredDuringExecution) > 0:
		term = paa.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
	default:
		return Constraint{}
	}
	return Constraint{AntiAffinity: &AntiAffinity{TopologyKey: term.TopologyKey, Selector: term.LabelSelector, MatchLabelKeys: term.MatchLabelKeys,
		Namespaces: term.Namespaces, NamespaceSelector: term.NamespaceSelector}}
}
