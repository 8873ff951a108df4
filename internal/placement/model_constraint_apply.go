package placement

import (
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// Apply returns a copy of spec with the constraint at stage, and without the
// constraint at any other stage: soft to hard replaces our soft entry rather
// than adding a second one, and StageNone removes ours. Every other term and
// constraint is kept as it is.
func (c Constraint) Apply(spec *corev1.PodSpec, own *metav1.LabelSelector, stage pgv1.Stage) (*corev1.PodSpec, error) {
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

func applyAntiAffinity(spec *corev1.PodSpec, term corev1.PodAffinityTerm, stage pgv1.Stage) {
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
	case pgv1.StageSoft:
		paa.PreferredDuringSchedulingIgnoredDuringExecution = append(paa.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.WeightedPodAffinityTerm{Weight: SoftWeight, PodAffinityTerm: term})
	case pgv1.StageHard:
		paa.RequiredDuringSchedulingIgnoredDuringExecution = append(paa.RequiredDuringSchedulingIgnoredDuringExecution, term)
	}
	if len(paa.RequiredDuringSchedulingIgnoredDuringExecution) == 0 && len(paa.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		spec.Affinity.PodAntiAffinity = nil
	}
	if reflect.DeepEqual(*spec.Affinity, corev1.Affinity{}) {
		spec.Affinity = nil
	}
}

func applySpread(spec *corev1.PodSpec, s *Spread, own *metav1.LabelSelector, stage pgv1.Stage) {
	soft, hard := s.SpreadConstraint(own, pgv1.StageSoft), s.SpreadConstraint(own, pgv1.StageHard)
	spec.TopologySpreadConstraints = without(spec.TopologySpreadConstraints, func(c corev1.TopologySpreadConstraint) bool {
		return equalSpread(c, soft) || equalSpread(c, hard)
	})
	switch stage {
	case pgv1.StageSoft:
		spec.TopologySpreadConstraints = append(spec.TopologySpreadConstraints, soft)
	case pgv1.StageHard:
		spec.TopologySpreadConstraints = append(spec.TopologySpreadConstraints, hard)
	}
	if len(spec.TopologySpreadConstraints) == 0 {
		spec.TopologySpreadConstraints = nil
	}
}

// StageOf reports the stage at which spec carries the constraint: Hard if
// it has the hard form, else Soft if it has the soft form, else None.
func (c Constraint) StageOf(spec *corev1.PodSpec, own *metav1.LabelSelector) pgv1.Stage {
	switch {
	case c.AntiAffinity != nil:
		term := c.AntiAffinity.AffinityTerm(own)
		if spec.Affinity == nil || spec.Affinity.PodAntiAffinity == nil {
			return pgv1.StageNone
		}
		for _, t := range spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			if equalTerm(t, term) {
				return pgv1.StageHard
			}
		}
		for _, t := range spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			if t.Weight == SoftWeight && equalTerm(t.PodAffinityTerm, term) {
				return pgv1.StageSoft
			}
		}
	case c.Spread != nil:
		soft, hard := c.Spread.SpreadConstraint(own, pgv1.StageSoft), c.Spread.SpreadConstraint(own, pgv1.StageHard)
		stage := pgv1.StageNone
		for _, tsc := range spec.TopologySpreadConstraints {
			if equalSpread(tsc, hard) {
				return pgv1.StageHard
			}
			if equalSpread(tsc, soft) {
				stage = pgv1.StageSoft
			}
		}
		return stage
	}
	return pgv1.StageNone
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
