package placement

import (
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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
