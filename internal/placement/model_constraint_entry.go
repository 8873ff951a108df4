package placement

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// Entry is what the stage writes into a template: a pod spec holding only
// the constraint's term or spread; nil for StageNone.
func (c Constraint) Entry(own *metav1.LabelSelector, stage pgv1.Stage) (*corev1.PodSpec, error) {
	if stage == pgv1.StageNone {
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
func StageOfEntry(entry *corev1.PodSpec) pgv1.Stage {
	switch {
	case entry == nil:
		return pgv1.StageNone
	case len(entry.TopologySpreadConstraints) > 0:
		if entry.TopologySpreadConstraints[0].WhenUnsatisfiable == corev1.DoNotSchedule {
			return pgv1.StageHard
		}
		return pgv1.StageSoft
	case entry.Affinity != nil && entry.Affinity.PodAntiAffinity != nil:
		if len(entry.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			return pgv1.StageHard
		}
		return pgv1.StageSoft
	}
	return pgv1.StageNone
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

// WithoutEntry is a copy of spec without the anti-affinity terms and
// spread constraints of entry: the pod as it would be had the migration not
// written them. Terms from other writers stay, compared as Carries does.
func WithoutEntry(spec, entry *corev1.PodSpec) *corev1.PodSpec {
	out := spec.DeepCopy()
	if entry == nil {
		return out
	}
	out.TopologySpreadConstraints = slices.DeleteFunc(out.TopologySpreadConstraints, func(c corev1.TopologySpreadConstraint) bool {
		return slices.ContainsFunc(entry.TopologySpreadConstraints, func(e corev1.TopologySpreadConstraint) bool { return equalSpread(c, e) })
	})
	if out.Affinity == nil || out.Affinity.PodAntiAffinity == nil || entry.Affinity == nil || entry.Affinity.PodAntiAffinity == nil {
		return out
	}
	have, written := out.Affinity.PodAntiAffinity, entry.Affinity.PodAntiAffinity
	have.RequiredDuringSchedulingIgnoredDuringExecution = slices.DeleteFunc(have.RequiredDuringSchedulingIgnoredDuringExecution, func(t corev1.PodAffinityTerm) bool {
		return slices.ContainsFunc(written.RequiredDuringSchedulingIgnoredDuringExecution, func(e corev1.PodAffinityTerm) bool { return equalTerm(t, e) })
	})
	have.PreferredDuringSchedulingIgnoredDuringExecution = slices.DeleteFunc(have.PreferredDuringSchedulingIgnoredDuringExecution, func(t corev1.WeightedPodAffinityTerm) bool {
		return slices.ContainsFunc(written.PreferredDuringSchedulingIgnoredDuringExecution, func(e corev1.WeightedPodAffinityTerm) bool {
			return t.Weight == e.Weight && equalTerm(t.PodAffinityTerm, e.PodAffinityTerm)
		})
	})
	return out
}
