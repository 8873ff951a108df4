package planning

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/targets"
)

// A change written straight into a workload (a Helm upgrade, a GitOps
// sync, a kubectl apply) is asked the one question as the migration that
// would make it: each hard constraint the change leaves in the template
// is a migration of the workload to that constraint, hard at once, asked
// before its Hard stage with the namespace's migrations and disruption
// policies. The admission check, the Events of its findings and lint ask
// it so, and answer what the operator would answer of that migration.

// Change is a workload as a change leaves it, and what it is judged with.
type Change struct {
	// Target is the workload as the change leaves it, with the pods and
	// revision it runs now.
	Target *targets.Target
	// Before is the pod spec the change replaces; nil for a create, or
	// when it is not known. A hard constraint it carried already is the
	// workload's own, and claims nothing another migration holds.
	Before *corev1.PodSpec
	// Migrations are the PlacementMigrations of the workload's namespace.
	Migrations []pgv1.PlacementMigration
	// Policies are the namespace's disruption budgets and autoscalers.
	Policies Policies
	// Preflight asks the hard stage's pre-flight too: whether what the
	// rollout leaves survives drains, a zone's loss and the autoscaler's
	// maximum. It simulates up to fifty drains, a hundred times the rest
	// of the question on a large cluster, so the admission check leaves it
	// to the Events of its findings, judged off the request's path, as the
	// operator leaves it until the pods are stable.
	Preflight bool
}

// ConstraintFinding is what the one question finds of one hard
// constraint of a change.
type ConstraintFinding struct {
	Constraint placement.Constraint
	Hazards    []placement.Hazard
}

// JudgeChange asks the one question about each hard constraint of the
// change, as a rollout that adds it to the workload as it runs without it:
// another migration that holds the field, whether the nodes exist, whether
// the rollout completes, where it leaves the pods, what else the selector
// counts, and whether what it leaves survives drains, zone loss and the
// autoscaler. withNodes says, per constraint, whether the snapshot's nodes
// can tell (a topology they carry); without, only the claim and the
// findings that need no nodes are asked for.
func JudgeChange(snap *placement.Snapshot, ch Change, withNodes func(placement.Constraint) bool) ([]ConstraintFinding, error) {
	w := ch.Target.Workload
	var out []ConstraintFinding
	for _, c := range HardConstraints(&w.Template.Spec) {
		sit, err := ch.situation(c)
		if err != nil {
			return nil, err
		}
		var hs []placement.Hazard
		ref := ch.Target.Workload.Ref()
		if claim := claimOnChange(sit.Intent, ref, sit.Others); claim != nil {
			hs = append(hs, claimOfChange(*claim))
		}
		// Unlike a migration's, a change is written whoever else writes
		// the field: what it does is judged all the same, so that a
		// second writer never makes a deadlock admissible.
		sit.Intent.Held = []pgv1.TargetRef{ref}
		var found []placement.Hazard
		if withNodes(c) {
			found, err = judgeWithNodes(snap, sit, ch.Preflight)
		} else {
			found = judgeWithoutNodes(snap, sit)
		}
		if err != nil {
			return nil, fmt.Errorf("judge the %s of %s: %w", c.Short(), ch.Target, err)
		}
		toldOnly(found, placement.HazardUnknownScheduler)
		out = append(out, ConstraintFinding{Constraint: c, Hazards: append(hs, found...)})
	}
	return out, nil
}

// toldOnly makes the findings of type a note, not a stop. A change whose
// pods name a scheduler the engine has no profile of is judged with the
// fallback profile all the same, and told so: refusing it for that alone
// would refuse every change to those workloads, and letting it through
// unjudged would let a tenant walk around Deny by naming a scheduler.
func toldOnly(found []placement.Hazard, hazard string) {
	for i := range found {
		if found[i].Type == hazard {
			found[i].Blocking = false
		}
	}
}

// situation is the one question's situation for the migration that would
// make the change's constraint c: the workload without c as its target.
func (ch Change) situation(c placement.Constraint) (Situation, error) {
	t := ch.Target
	spec, err := c.Apply(&t.Workload.Template.Spec, t.Workload.Selector, pgv1.StageNone)
	if err != nil {
		return Situation{}, fmt.Errorf("take the %s out of %s: %w", c.Short(), t, err)
	}
	view := *t
	view.Workload = t.Workload.WithSpec(spec)
	ref := t.Workload.Ref()
	target := &Target{Target: &view, Ref: ref}
	Render([]*Target{target}, c)
	return Situation{Intent: ch.intent(ref, c), Targets: []*Target{target},
		Others: ch.Migrations, Policies: ch.Policies, Change: true}, nil
}

// intent is the migration that would write constraint c into the workload
// ref names, hard at once: never created, so the newest of its namespace,
// and holding the field when the workload carried c before the change. Its
// guards are a migration's defaults: the pre-flight warns.
func (ch Change) intent(ref pgv1.TargetRef, c placement.Constraint) Intent {
	in := Intent{Constraint: c, Final: pgv1.StageHard, Provision: pgv1.ProvisionNone, Disruptions: pgv1.DisruptionWarn, MinPodAge: pgv1.DefaultMinPodAge}
	if ch.carried(c) {
		in.Held = []pgv1.TargetRef{ref}
	}
	return in
}

// carried reports whether the spec the change replaces had constraint c.
func (ch Change) carried(c placement.Constraint) bool {
	if ch.Before == nil {
		return false
	}
	return slices.ContainsFunc(HardConstraints(ch.Before), func(b placement.Constraint) bool {
		return equality.Semantic.DeepEqual(b, c)
	})
}

// judgeWithNodes asks the question before the Hard stage, the pre-flight
// when it is asked for and due.
func judgeWithNodes(snap *placement.Snapshot, sit Situation, preflight bool) ([]placement.Hazard, error) {
	v, err := AskStage(snap, sit, pgv1.StageHard)
	if err != nil {
		return nil, err
	}
	if preflight && v.PreflightDue(sit.Intent) {
		if err := v.AskPreflight(snap, sit); err != nil {
			return nil, err
		}
	}
	hs := UniqueHazards(v.Answers)
	if h := PreflightOf(sit, v); h != nil {
		hs = append(hs, *h)
	}
	for i := range hs {
		if fix, ok := changeFixes[hs[i].Type]; ok {
			hs[i].Fix = fix
		}
	}
	return hs, nil
}

// changeFixes word, for a change written straight into a workload, the
// fixes the engine words for a migration's stage: a change has no stage
// to keep, and what waits for the nodes is a PlacementMigration.
var changeFixes = map[string]string{
	placement.HazardInsufficientCapacity: "add the nodes first, or make it a PlacementMigration that waits for them (kubectl placement plan)",
	placement.HazardUnschedulable:        "add nodes that admit the pod first, or make it a PlacementMigration (kubectl placement plan)",
}

// judgeWithoutNodes asks the engine's findings that need no nodes.
func judgeWithoutNodes(snap *placement.Snapshot, sit Situation) []placement.Hazard {
	q := placement.Question{Workloads: []*placement.Workload{WithOthers(sit.Intent, sit.Others, sit.Targets[0])},
		Constraint: sit.Intent.Constraint, Stage: pgv1.StageHard}
	return snap.Findings(q)
}

// claimOnChange is the first other migration that writes, or is to
// write, the field the change writes on its workload ref; nil when none
// does, or when the workload carried the constraint before the change. A
// change is written after every migration: one that only names the
// workload (not reconciled yet, or beside the workload in manifests)
// claims it as well as one that holds it. Migrations being deleted, and
// dry runs, claim nothing, as ClaimOf says.
func claimOnChange(in Intent, ref pgv1.TargetRef, others []pgv1.PlacementMigration) *Claim {
	if in.Holds(ref) {
		return nil
	}
	for i := range others {
		o := &others[i]
		if !o.DeletionTimestamp.IsZero() || o.Spec.DryRun || compatible(in.Constraint, o.Spec.Constraint) {
			continue
		}
		if Holds(o, ref) || targetsOf(o, ref) {
			return &Claim{Migration: o.Name, Target: ref, Field: fieldOf(in.Constraint)}
		}
	}
	return nil
}

// claimOfChange words a claim on a field a change writes directly: the
// migration holding it writes its entry back over the change.
func claimOfChange(c Claim) placement.Hazard {
	return placement.Hazard{Type: pgv1.ReasonTargetClaimed, Workload: c.Target, Message: fmt.Sprintf(
		"%s: the change writes %s, which PlacementMigration %s writes: the operator writes its entry back over another writer's, then stalls, and the two fight over the pods. Change or delete PlacementMigration %s instead, or spread on another key",
		c.Target.String(), c.Field, c.Migration, c.Migration),
		Fix: "change that PlacementMigration instead, or delete it first"}
}
