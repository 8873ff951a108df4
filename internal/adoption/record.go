package adoption

import (
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// Records reads the records a workload's annotations carry; none when it
// has no annotation.
func Records(annotations map[string]string) ([]Record, error) {
	raw, ok := annotations[Annotation]
	if !ok || raw == "" {
		return nil, nil
	}
	var out []Record
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		return nil, fmt.Errorf("read annotation %s: %w", Annotation, err)
	}
	for _, r := range out {
		if (r.Term == nil) == (r.Spread == nil) || r.Migration == "" {
			return nil, fmt.Errorf("read annotation %s: a record needs a migration and exactly one of term or spread", Annotation)
		}
	}
	return out, nil
}

// Merge adds records to those already carried, each migration once. A
// migration's first record stays as it is: a manifest applied again brings
// the same constraint at whatever place the merge puts it, and a record
// that moved would change the workload at every sync.
func Merge(have, add []Record) []Record {
	out := slices.Clone(have)
	for _, r := range add {
		if !slices.ContainsFunc(out, func(h Record) bool { return h.Migration == r.Migration }) {
			out = append(out, r)
		}
	}
	return out
}

// Dropped are the records whose constraint their author's write left out:
// a write by the field manager that made the change (its manifest applied
// again, a sync) that does not carry the constraint's hard form, which it
// would if its manifest still had it. The soft form, if the write leaves
// it (it belongs to no manager, and a sync keeps it), goes with the record.
// spec is the pod spec the write leaves.
func Dropped(have []Record, author string, spec *corev1.PodSpec) []Record {
	if author == "" {
		return nil
	}
	var out []Record
	for _, r := range have {
		if r.Author != author {
			continue
		}
		if r.carriedHard(spec) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// carriedHard reports whether spec carries the record's hard form.
func (r Record) carriedHard(spec *corev1.PodSpec) bool {
	if r.Term != nil {
		return spec.Affinity != nil && spec.Affinity.PodAntiAffinity != nil &&
			containsTerm(spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, *r.Term)
	}
	return containsSpread(spec.TopologySpreadConstraints, *r.Spread)
}

// Ending is records with the adoption of each of end ended for why.
func Ending(records []Record, end []Record, why string) []Record {
	out := slices.Clone(records)
	for i := range out {
		if out[i].Active() && slices.ContainsFunc(end, func(e Record) bool { return e.Migration == out[i].Migration }) {
			out[i].Ended = why
		}
	}
	return out
}

// Marked is records with the record of migration marked as made, by the
// migration of uid.
func Marked(records []Record, migration, uid string) []Record {
	out := slices.Clone(records)
	for i := range out {
		if out[i].Migration == migration {
			out[i].Made = uid
		}
	}
	return out
}

// TakenBack are the active records whose constraint a write by someone
// other than its author took to a weaker form: from hard to soft or none,
// or from soft to none, as `kubectl rollout undo`, a rollback by another
// tool or an edit does. old and new are the pod specs before and after
// the write. Such a write ends the adoption: the operator would otherwise
// harden again what the person just took back.
func TakenBack(have []Record, writer string, old, new *corev1.PodSpec) []Record {
	var out []Record
	for _, r := range have {
		if !r.Active() || r.Author == writer && writer != "" {
			continue
		}
		if r.StageIn(new).Rank() < r.StageIn(old).Rank() {
			out = append(out, r)
		}
	}
	return out
}

// StageIn is the form of the record's constraint spec carries: hard,
// soft, or none.
func (r Record) StageIn(spec *corev1.PodSpec) pgv1.Stage {
	switch {
	case spec == nil:
		return pgv1.StageNone
	case r.carriedHard(spec):
		return pgv1.StageHard
	case r.carriedSoft(spec):
		return pgv1.StageSoft
	}
	return pgv1.StageNone
}

// carriedSoft reports whether spec carries the record's soft form.
func (r Record) carriedSoft(spec *corev1.PodSpec) bool {
	if r.Term != nil {
		return spec.Affinity != nil && spec.Affinity.PodAntiAffinity != nil &&
			slices.ContainsFunc(spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, func(t corev1.WeightedPodAffinityTerm) bool {
				return t.Weight == placement.SoftWeight && containsTerm([]corev1.PodAffinityTerm{*r.Term}, t.PodAffinityTerm)
			})
	}
	return containsSpread(spec.TopologySpreadConstraints, softSpread(*r.Spread))
}

// Without are the records less those of the migrations in drop.
func Without(have, drop []Record) []Record {
	return slices.DeleteFunc(slices.Clone(have), func(r Record) bool {
		return slices.ContainsFunc(drop, func(d Record) bool { return d.Migration == r.Migration })
	})
}

// Encode writes records as the annotation's value.
func Encode(records []Record) (string, error) {
	raw, err := json.Marshal(records)
	if err != nil {
		return "", fmt.Errorf("write annotation %s: %w", Annotation, err)
	}
	return string(raw), nil
}

// Find is the record of a migration among a workload's annotations.
func Find(annotations map[string]string, migration string) (*Record, error) {
	records, err := Records(annotations)
	if err != nil {
		return nil, err
	}
	for i := range records {
		if records[i].Migration == migration {
			return &records[i], nil
		}
	}
	return nil, nil
}

// Constraint is the record's constraint in the API's form, exactly as the
// change wrote it: its own selector, and for a spread without
// matchLabelKeys every revision counted, so that the migration's hard
// stage writes back what the manifest says.
func (r Record) Constraint() pgv1.Constraint {
	return planning.SpecFromConstraint(r.constraint())
}

// Short names the record's constraint in a few words.
func (r Record) Short() string { return r.constraint().Short() }

// constraint is the record's constraint in the engine's form, counting
// every revision.
func (r Record) constraint() placement.Constraint {
	entry := &corev1.PodSpec{}
	if r.Term != nil {
		entry.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{*r.Term}}}
	} else {
		entry.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{*r.Spread}
	}
	c := placement.ConstraintOf(entry)
	if c.Spread != nil {
		c.Spread.AllRevisions = true
	}
	return c
}

// Place writes the record's constraint into spec at stage: the hard form
// back where the change had it, the soft form as Soften writes it, or
// neither. Whatever form spec carried is removed first; everything else
// is left as it was.
func (r Record) Place(spec *corev1.PodSpec, stage pgv1.Stage) *corev1.PodSpec {
	out := spec.DeepCopy()
	if r.Term != nil {
		placeTerm(out, *r.Term, r.Index, stage)
	} else {
		placeSpread(out, *r.Spread, r.Index, stage)
	}
	return out
}

func placeTerm(spec *corev1.PodSpec, term corev1.PodAffinityTerm, index int, stage pgv1.Stage) {
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	if spec.Affinity.PodAntiAffinity == nil {
		spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{}
	}
	paa := spec.Affinity.PodAntiAffinity
	soft := corev1.WeightedPodAffinityTerm{Weight: placement.SoftWeight, PodAffinityTerm: term}
	paa.RequiredDuringSchedulingIgnoredDuringExecution = slices.DeleteFunc(paa.RequiredDuringSchedulingIgnoredDuringExecution, func(t corev1.PodAffinityTerm) bool {
		return containsTerm([]corev1.PodAffinityTerm{term}, t)
	})
	paa.PreferredDuringSchedulingIgnoredDuringExecution = slices.DeleteFunc(paa.PreferredDuringSchedulingIgnoredDuringExecution, func(t corev1.WeightedPodAffinityTerm) bool {
		return t.Weight == soft.Weight && containsTerm([]corev1.PodAffinityTerm{term}, t.PodAffinityTerm)
	})
	switch stage {
	case pgv1.StageHard:
		at := min(index, len(paa.RequiredDuringSchedulingIgnoredDuringExecution))
		paa.RequiredDuringSchedulingIgnoredDuringExecution = slices.Insert(paa.RequiredDuringSchedulingIgnoredDuringExecution, at, term)
	case pgv1.StageSoft:
		paa.PreferredDuringSchedulingIgnoredDuringExecution = append(paa.PreferredDuringSchedulingIgnoredDuringExecution, soft)
	}
	if len(paa.RequiredDuringSchedulingIgnoredDuringExecution) == 0 {
		paa.RequiredDuringSchedulingIgnoredDuringExecution = nil
	}
	if len(paa.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		paa.PreferredDuringSchedulingIgnoredDuringExecution = nil
	}
	if paa.RequiredDuringSchedulingIgnoredDuringExecution == nil && paa.PreferredDuringSchedulingIgnoredDuringExecution == nil {
		spec.Affinity.PodAntiAffinity = nil
	}
	if spec.Affinity.NodeAffinity == nil && spec.Affinity.PodAffinity == nil && spec.Affinity.PodAntiAffinity == nil {
		spec.Affinity = nil
	}
}

func placeSpread(spec *corev1.PodSpec, hard corev1.TopologySpreadConstraint, index int, stage pgv1.Stage) {
	soft := softSpread(hard)
	at := slices.IndexFunc(spec.TopologySpreadConstraints, func(s corev1.TopologySpreadConstraint) bool {
		return containsSpread([]corev1.TopologySpreadConstraint{hard, soft}, s)
	})
	spec.TopologySpreadConstraints = slices.DeleteFunc(spec.TopologySpreadConstraints, func(s corev1.TopologySpreadConstraint) bool {
		return containsSpread([]corev1.TopologySpreadConstraint{hard, soft}, s)
	})
	if at < 0 {
		at = index
	}
	at = min(at, len(spec.TopologySpreadConstraints))
	switch stage {
	case pgv1.StageHard:
		spec.TopologySpreadConstraints = slices.Insert(spec.TopologySpreadConstraints, at, hard)
	case pgv1.StageSoft:
		spec.TopologySpreadConstraints = slices.Insert(spec.TopologySpreadConstraints, at, soft)
	}
	if len(spec.TopologySpreadConstraints) == 0 {
		spec.TopologySpreadConstraints = nil
	}
}
