package planning

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// Intent is one placement change as the one question asks it: the
// constraint it writes and the stage it ends at, the capacity it needs
// and asks for, its guards, and the targets it has written already. A
// PlacementMigration is one (IntentOf). A change written straight into a
// workload is another (Change): the migration that would make it, which
// is never created, so it has no name and is the newest of its namespace.
type Intent struct {
	// Name is the migration's: the namespace's other migrations are told
	// from it by name. Empty for a change.
	Name string
	// UID marks the placeholders of the capacity it asks for as its own.
	UID types.UID
	// Created orders it among migrations that would write one field: the
	// older goes first. Zero for one not created (a change, or a
	// migration plan reads from a file), which comes last.
	Created metav1.Time
	// Constraint is what it writes into its targets' pod templates.
	Constraint placement.Constraint
	// Final is the stage it ends at.
	Final pgv1.Stage
	// Capacity is the nodes and domains it needs before a stage.
	Capacity placement.CapacitySpec
	// Provision is how it asks for the capacity it lacks, and MaxNodes
	// bounds the request (0: the engine's own bound).
	Provision pgv1.ProvisionMode
	MaxNodes  int
	// Disruptions is whether the Hard stage's pre-flight is asked, and
	// whether a target that does not survive it blocks.
	Disruptions pgv1.DisruptionPolicy
	// MinPodAge is how long the targets' pods run before a stage.
	MinPodAge time.Duration
	// Held are the targets it has written, or is writing: on these, the
	// field is its own.
	Held []pgv1.TargetRef
}

// IntentOf is what migration pm sets out to do, and the targets it holds.
func IntentOf(pm *pgv1.PlacementMigration) Intent {
	in := Intent{
		Name: pm.Name, UID: pm.UID, Created: pm.CreationTimestamp,
		Constraint:  ConstraintFromSpec(pm.Spec.Constraint),
		Final:       pm.Spec.Final(),
		Capacity:    CapacityFromSpec(pm.Spec.Capacity),
		Provision:   pm.Spec.Capacity.ProvisionMode(),
		Disruptions: pm.Spec.DisruptionCheck(),
		MinPodAge:   pm.Spec.MinPodAge(),
	}
	if c := pm.Spec.Capacity; c != nil && c.Provision != nil && c.Provision.MaxNodes != nil {
		in.MaxNodes = int(*c.Provision.MaxNodes)
	}
	var recorded []pgv1.TargetRef
	if op := pm.Status.Operation; op != nil {
		for _, ot := range op.Targets {
			recorded = append(recorded, ot.Ref())
		}
	}
	for _, ts := range pm.Status.Targets {
		recorded = append(recorded, ts.Ref())
	}
	for _, ref := range recorded {
		if Holds(pm, ref) && !in.Holds(ref) {
			in.Held = append(in.Held, ref)
		}
	}
	return in
}

// Holds reports whether the intent has written, or is writing, target ref.
func (in Intent) Holds(ref pgv1.TargetRef) bool {
	for _, h := range in.Held {
		if h == ref {
			return true
		}
	}
	return false
}

// isOther reports whether migration o is another than the intent: a
// change is no migration, so every migration is another to it.
func (in Intent) isOther(o *pgv1.PlacementMigration) bool {
	return in.Name == "" || o.Name != in.Name
}

// RequestSpec is how the intent's capacity request is bounded
// (spec.capacity.provision.maxNodes) and marked as its own.
func (in Intent) RequestSpec() placement.RequestSpec {
	return placement.RequestSpec{MaxNodes: in.MaxNodes, Labels: map[string]string{placement.PlaceholderLabel: string(in.UID)}}
}
