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
		if r.StageIn(spec) == pgv1.StageHard {
			continue
		}
		out = append(out, r)
	}
	return out
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
	if r.Term != nil {
		return placement.TermStage(spec, *r.Term)
	}
	return placement.SpreadStage(spec, *r.Spread)
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
// neither, through the engine's placing of a constraint's forms. Whatever
// form spec carried is removed first; everything else is left as it was.
func (r Record) Place(spec *corev1.PodSpec, stage pgv1.Stage) *corev1.PodSpec {
	out := spec.DeepCopy()
	if r.Term != nil {
		placement.PlaceTerm(out, *r.Term, stage, r.Index)
	} else {
		placement.PlaceSpread(out, *r.Spread, stage, r.Index)
	}
	return out
}
