package planning

import (
	"fmt"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// Other migrations of the same targets. Several migrations may target one
// workload. Each writes with its own field manager, so compatible
// constraints (a zone spread and a hostname spread) live side by side, and
// each is judged with the others' final stages in place. Two constraints
// that would write the same field cannot: the pod anti-affinity term lists
// are atomic (a writer owns a list whole), and spread constraints are
// keyed by topologyKey and whenUnsatisfiable. The migration that holds the
// field keeps it; the other is refused, naming it. The operator, plan and
// lint ask this the same way.

// Compatible reports whether two constraints can share a workload.
func Compatible(a, b pgv1.Constraint) bool {
	switch {
	case a.PodAntiAffinity != nil && b.PodAntiAffinity != nil:
		return false
	case a.TopologySpread != nil && b.TopologySpread != nil:
		return a.TopologySpread.TopologyKey != b.TopologySpread.TopologyKey
	}
	return true
}

// Holds reports whether migration pm has written, or is writing, target ref.
func Holds(pm *pgv1.PlacementMigration, ref pgv1.TargetRef) bool {
	if pm.Status.Operation != nil {
		for _, ot := range pm.Status.Operation.Targets {
			if ot.Kind == ref.Kind && ot.Name == ref.Name {
				return true
			}
		}
	}
	for _, ts := range pm.Status.Targets {
		if ts.Kind == ref.Kind && ts.Name == ref.Name && (ts.Applied != nil || (ts.Stage != "" && ts.Stage != pgv1.StageNone)) {
			return true
		}
	}
	return false
}

// targetsOf reports whether migration pm has target ref among its
// targets: recorded in its status, or named in its spec (a migration not
// reconciled yet, or one a plan or lint reads from a file). A selector's
// targets count once the operator has recorded them.
func targetsOf(pm *pgv1.PlacementMigration, ref pgv1.TargetRef) bool {
	for _, ts := range pm.Status.Targets {
		if ts.Kind == ref.Kind && ts.Name == ref.Name {
			return true
		}
	}
	for _, t := range pm.Spec.Targets {
		if t.Kind == ref.Kind && t.Name == ref.Name {
			return true
		}
	}
	return false
}

// olderThan orders migrations by creation, then name: the older one takes
// a field neither holds yet. A migration not created yet (one a plan reads
// from a file) is the newest.
func olderThan(a, b *pgv1.PlacementMigration) bool {
	switch {
	case a.CreationTimestamp.IsZero() != b.CreationTimestamp.IsZero():
		return b.CreationTimestamp.IsZero()
	case !a.CreationTimestamp.Equal(&b.CreationTimestamp):
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// Claim is another migration that holds, or goes first for, a field a
// migration would write on one of its targets.
type Claim struct {
	// Migration is the other migration's name.
	Migration string
	Target    pgv1.TargetRef
	// Field names the field both would write.
	Field string
}

// Message says what the claim means and what to do, in the operator's
// and the plugin's words alike.
func (c Claim) Message() string {
	return fmt.Sprintf(
		"%s is also a target of PlacementMigration %s, whose constraint writes the same field (%s); one migration writes a field at a time, and %s came first. Nothing was written: delete one of the two, or spread on another key",
		c.Target.String(), c.Migration, c.Field, c.Migration)
}

// ClaimOf is the first other migration of the namespace that holds, or
// goes first for, a field pm would write on one of refs; nil when none
// does. Migrations being deleted, and dry runs, which never write, claim
// nothing.
func ClaimOf(pm *pgv1.PlacementMigration, others []pgv1.PlacementMigration, refs []pgv1.TargetRef) *Claim {
	for i := range others {
		o := &others[i]
		if o.Name == pm.Name || !o.DeletionTimestamp.IsZero() || o.Spec.DryRun || Compatible(pm.Spec.Constraint, o.Spec.Constraint) {
			continue
		}
		for _, ref := range refs {
			if Holds(pm, ref) {
				continue
			}
			if Holds(o, ref) || targetsOf(o, ref) && olderThan(o, pm) {
				return &Claim{Migration: o.Name, Target: ref, Field: fieldOf(pm.Spec.Constraint)}
			}
		}
	}
	return nil
}

func fieldOf(c pgv1.Constraint) string {
	if c.PodAntiAffinity != nil {
		return "the pod anti-affinity term lists"
	}
	return "the spread on " + c.TopologySpread.TopologyKey
}

// WithOthers is the target's workload with the final stage of every other
// compatible migration of it added to the template, so that two
// compatible migrations do not each pass on a cluster that cannot hold
// both.
func WithOthers(pm *pgv1.PlacementMigration, others []pgv1.PlacementMigration, t *Target) *placement.Workload {
	w := t.Workload
	for i := range others {
		o := &others[i]
		if o.Name == pm.Name || o.Spec.DryRun || !targetsOf(o, t.Ref) || !Compatible(pm.Spec.Constraint, o.Spec.Constraint) || !o.DeletionTimestamp.IsZero() {
			continue
		}
		c := ConstraintFromSpec(o.Spec.Constraint).RenderFor(w, []*placement.Workload{w})
		spec, err := c.Apply(&w.Template.Spec, w.Selector, o.Spec.Final())
		if err != nil {
			continue
		}
		w = w.WithSpec(spec)
	}
	return w
}

// InFlight names another migration with a write in flight on one of the
// targets (its status.operation), and the target; "" when none has.
func InFlight(pm *pgv1.PlacementMigration, others []pgv1.PlacementMigration, refs []pgv1.TargetRef) (string, pgv1.TargetRef) {
	for _, ref := range refs {
		for i := range others {
			o := &others[i]
			if o.Name == pm.Name || o.Status.Operation == nil {
				continue
			}
			for _, ot := range o.Status.Operation.Targets {
				if ot.Kind == ref.Kind && ot.Name == ref.Name {
					return o.Name, ref
				}
			}
		}
	}
	return "", pgv1.TargetRef{}
}
