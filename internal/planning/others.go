package planning

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// compatible reports whether constraint c and another migration's
// constraint o can share a workload.
func compatible(c placement.Constraint, o pgv1.Constraint) bool {
	switch {
	case c.AntiAffinity != nil && o.PodAntiAffinity != nil:
		return false
	case c.Spread != nil && o.TopologySpread != nil:
		return c.Spread.TopologyKey != o.TopologySpread.TopologyKey
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

// olderThan orders migration o before the one created at created and
// named name, by creation, then name: the older one takes a field neither
// holds yet. One not created (a change, or a migration a plan reads from
// a file) is the newest.
func olderThan(o *pgv1.PlacementMigration, created metav1.Time, name string) bool {
	switch {
	case o.CreationTimestamp.IsZero() != created.IsZero():
		return created.IsZero()
	case !o.CreationTimestamp.Equal(&created):
		return o.CreationTimestamp.Before(&created)
	}
	return o.Name < name
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
// goes first for, a field the intent would write on one of refs; nil when
// none does. Migrations being deleted, and dry runs, which never write,
// claim nothing.
func ClaimOf(in Intent, others []pgv1.PlacementMigration, refs []pgv1.TargetRef) *Claim {
	for i := range others {
		o := &others[i]
		if !in.isOther(o) || !o.DeletionTimestamp.IsZero() || o.Spec.DryRun || compatible(in.Constraint, o.Spec.Constraint) {
			continue
		}
		for _, ref := range refs {
			if in.Holds(ref) {
				continue
			}
			if Holds(o, ref) || targetsOf(o, ref) && olderThan(o, in.Created, in.Name) {
				return &Claim{Migration: o.Name, Target: ref, Field: fieldOf(in.Constraint)}
			}
		}
	}
	return nil
}

func fieldOf(c placement.Constraint) string {
	if c.AntiAffinity != nil {
		return "the pod anti-affinity term lists"
	}
	return "the spread on " + c.Spread.TopologyKey
}

// WithOthers is the target's workload with the final stage of every other
// compatible migration of it added to the template, so that two
// compatible migrations do not each pass on a cluster that cannot hold
// both.
func WithOthers(in Intent, others []pgv1.PlacementMigration, t *Target) *placement.Workload {
	w := t.Workload
	for i := range others {
		o := &others[i]
		if !in.isOther(o) || o.Spec.DryRun || !targetsOf(o, t.Ref) || !compatible(in.Constraint, o.Spec.Constraint) || !o.DeletionTimestamp.IsZero() {
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
func InFlight(in Intent, others []pgv1.PlacementMigration, refs []pgv1.TargetRef) (string, pgv1.TargetRef) {
	for _, ref := range refs {
		for i := range others {
			o := &others[i]
			if !in.isOther(o) || o.Status.Operation == nil || o.Status.Operation.Held() {
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
