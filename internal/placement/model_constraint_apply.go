package placement

import (
	"fmt"
	"math"
	"reflect"
	"slices"

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
		PlaceTerm(out, c.AntiAffinity.AffinityTerm(own), stage, atTheEnd)
	case c.Spread != nil:
		PlaceSpread(out, c.Spread.SpreadConstraint(own, pgv1.StageHard), stage, atTheEnd)
	default:
		return nil, fmt.Errorf("apply constraint: neither anti-affinity nor spread is set")
	}
	return out, nil
}

// atTheEnd places a form after every other entry.
const atTheEnd = math.MaxInt

// PlaceTerm writes the required anti-affinity term into spec at stage: as
// a required term at position at of the required ones (or last), as a
// preferred one of SoftWeight, or neither; whichever form spec carried is
// removed first, and every other term is left as it was. The operator's
// stages and an adopted change's record write their terms through it.
func PlaceTerm(spec *corev1.PodSpec, term corev1.PodAffinityTerm, stage pgv1.Stage, at int) {
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
		required := paa.RequiredDuringSchedulingIgnoredDuringExecution
		paa.RequiredDuringSchedulingIgnoredDuringExecution = slices.Insert(required, min(max(at, 0), len(required)), term)
	}
	if len(paa.RequiredDuringSchedulingIgnoredDuringExecution) == 0 && len(paa.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		spec.Affinity.PodAntiAffinity = nil
	}
	if reflect.DeepEqual(*spec.Affinity, corev1.Affinity{}) {
		spec.Affinity = nil
	}
}

// PlaceSpread writes the DoNotSchedule spread hard into spec at stage: as
// it is, as its soft form (SoftSpread), or neither. The form takes the
// place of the one spec carried, or position at (or last) when it carried
// none; every other constraint is left as it was.
func PlaceSpread(spec *corev1.PodSpec, hard corev1.TopologySpreadConstraint, stage pgv1.Stage, at int) {
	soft := SoftSpread(hard)
	ours := func(c corev1.TopologySpreadConstraint) bool { return equalSpread(c, soft) || equalSpread(c, hard) }
	if was := slices.IndexFunc(spec.TopologySpreadConstraints, ours); was >= 0 {
		at = was
	}
	spec.TopologySpreadConstraints = without(spec.TopologySpreadConstraints, ours)
	at = min(max(at, 0), len(spec.TopologySpreadConstraints))
	switch stage {
	case pgv1.StageSoft:
		spec.TopologySpreadConstraints = slices.Insert(spec.TopologySpreadConstraints, at, soft)
	case pgv1.StageHard:
		spec.TopologySpreadConstraints = slices.Insert(spec.TopologySpreadConstraints, at, hard)
	}
	if len(spec.TopologySpreadConstraints) == 0 {
		spec.TopologySpreadConstraints = nil
	}
}

// SoftSpread is a DoNotSchedule spread's soft form: ScheduleAnyway, without
// minDomains, which the API allows only with DoNotSchedule.
func SoftSpread(hard corev1.TopologySpreadConstraint) corev1.TopologySpreadConstraint {
	out := *hard.DeepCopy()
	out.WhenUnsatisfiable = corev1.ScheduleAnyway
	out.MinDomains = nil
	return out
}

// StageOf reports the stage at which spec carries the constraint: Hard if
// it has the hard form, else Soft if it has the soft form, else None.
func (c Constraint) StageOf(spec *corev1.PodSpec, own *metav1.LabelSelector) pgv1.Stage {
	switch {
	case c.AntiAffinity != nil:
		return TermStage(spec, c.AntiAffinity.AffinityTerm(own))
	case c.Spread != nil:
		return SpreadStage(spec, c.Spread.SpreadConstraint(own, pgv1.StageHard))
	}
	return pgv1.StageNone
}

// TermStage is the form in which spec carries the required anti-affinity
// term: Hard as a required term, Soft as a preferred one of SoftWeight,
// else None.
func TermStage(spec *corev1.PodSpec, term corev1.PodAffinityTerm) pgv1.Stage {
	if spec == nil || spec.Affinity == nil || spec.Affinity.PodAntiAffinity == nil {
		return pgv1.StageNone
	}
	if slices.ContainsFunc(spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, func(t corev1.PodAffinityTerm) bool {
		return equalTerm(t, term)
	}) {
		return pgv1.StageHard
	}
	if slices.ContainsFunc(spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, func(t corev1.WeightedPodAffinityTerm) bool {
		return t.Weight == SoftWeight && equalTerm(t.PodAffinityTerm, term)
	}) {
		return pgv1.StageSoft
	}
	return pgv1.StageNone
}

// SpreadStage is the form in which spec carries the DoNotSchedule spread
// hard: Hard as it is, Soft as its soft form, else None.
func SpreadStage(spec *corev1.PodSpec, hard corev1.TopologySpreadConstraint) pgv1.Stage {
	if spec == nil {
		return pgv1.StageNone
	}
	soft, stage := SoftSpread(hard), pgv1.StageNone
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
