package planning

import (
	"fmt"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// The one question. Before each stage the operator asks it of its warm
// snapshot, `kubectl placement plan` of a snapshot it read or was given;
// both hand in the same situation, so that they cannot answer differently
// for the same cluster.

// Situation is what a verdict on a migration's next stage hangs on.
type Situation struct {
	// Intent is the migration asked about, or the change (JudgeChange).
	Intent Intent
	// Targets are the migration's targets, resolved and rendered.
	Targets []*Target
	// Others are the migrations of the namespace, this one among them or
	// not: a compatible one's final stage is judged with, one holding the
	// field claims the targets.
	Others []pgv1.PlacementMigration
	// Companions are workloads whose pods the constraint counts with the
	// targets' (those that left the set keeping its entry).
	Companions []*placement.Workload
	// Policies are the namespace's disruption budgets and autoscalers.
	Policies Policies
	// Change says the situation is a change written straight into a
	// workload, judged as the migration that would make it (JudgeChange):
	// there is no stage to keep, so its findings are said of the change.
	Change bool
}

// Refs are the situation's targets.
func (sit Situation) Refs() []pgv1.TargetRef {
	refs := make([]pgv1.TargetRef, len(sit.Targets))
	for i, t := range sit.Targets {
		refs[i] = t.Ref
	}
	return refs
}

// Verdict is the answer about one stage.
type Verdict struct {
	Stage pgv1.Stage
	// Profile is the kube-scheduler profile the answers predicted every
	// target's pods with; "" when the targets' pods name different ones
	// (each plan entry names its own).
	Profile string
	// Claim is another migration holding the field the targets would
	// get; when set, nothing else was asked.
	Claim *Claim
	// Workloads are the targets as judged: each with the final stage of
	// the other compatible migrations of it.
	Workloads []*placement.Workload
	// Stages are the stages asked, the stage and then, when it is
	// another, the final stage: a stage is not applied when the final one
	// cannot follow it. Answers are the engine's, one per stage.
	Stages  []pgv1.Stage
	Answers []placement.Answer
	// Disruptions is the hard stage's pre-flight on the placement its
	// rollout leaves; asked only before the hard stage, when it has the
	// capacity and no blocking hazard, and the guards judge disruptions.
	Disruptions DisruptionVerdict
	// PreflightAsked says whether the pre-flight was asked.
	PreflightAsked bool
	// Request is what the migration would ask its autoscaler for
	// (spec.capacity.provision), sized from the final stage's answer; nil
	// when its mode is None or another migration holds the targets.
	Request *placement.CapacityRequest
}

// Evaluate asks the one question about the stage: the claim and the
// engine's answers (AskStage), then, when it is due, the pre-flight.
func Evaluate(snap *placement.Snapshot, sit Situation, stage pgv1.Stage) (Verdict, error) {
	v, err := AskStage(snap, sit, stage)
	if err != nil || !v.PreflightDue(sit.Intent) {
		return v, err
	}
	return v, v.AskPreflight(snap, sit)
}

// AskStage asks the first part of the one question: another migration's
// claim, then the engine's answers for the stage and the final stage. A
// decision asks the pre-flight (AskPreflight) only once the pods are
// stable too (Question).
func AskStage(snap *placement.Snapshot, sit Situation, stage pgv1.Stage) (Verdict, error) {
	in := sit.Intent
	v := Verdict{Stage: stage, Disruptions: Tolerated}
	if v.Claim = ClaimOf(in, sit.Others, sit.Refs()); v.Claim != nil {
		return v, nil
	}
	v.Workloads = make([]*placement.Workload, len(sit.Targets))
	for i, t := range sit.Targets {
		v.Workloads[i] = WithOthers(in, sit.Others, t)
	}
	final := in.Final
	v.Stages = []pgv1.Stage{stage}
	if stage != final {
		v.Stages = append(v.Stages, final)
	}
	q := placement.Question{Workloads: v.Workloads, Constraint: in.Constraint, Capacity: in.Capacity, Companions: sit.Companions}
	var err error
	if v.Answers, err = Ask(snap, q, v.Stages); err != nil {
		return v, err
	}
	v.Profile = sharedProfile(v.Answers[0])
	if in.Provision == pgv1.ProvisionNone {
		return v, nil
	}
	req, err := snap.RequestCapacity(v.Workloads, q.Constraint, q.Capacity, final, v.Answers[len(v.Answers)-1], in.RequestSpec())
	if err != nil {
		return v, fmt.Errorf("compute the capacity request: %w", err)
	}
	v.Request = &req
	return v, nil
}

// PreflightDue reports whether the verdict asks the pre-flight: before the
// hard stage, with the capacity and no blocking hazard, when the guards
// judge disruptions.
func (v Verdict) PreflightDue(in Intent) bool {
	return v.Stage == pgv1.StageHard && v.Claim == nil && len(v.Answers) > 0 &&
		in.Disruptions != pgv1.DisruptionIgnore && v.Answers[0].Capacity.Enough() && v.FirstBlocking() == nil
}

// AskPreflight asks the hard stage's pre-flight of a verdict it is due for:
// does what the rollout leaves survive the disruptions (DisruptionsAfterHard).
func (v *Verdict) AskPreflight(snap *placement.Snapshot, sit Situation) error {
	d, err := DisruptionsAfterHard(snap, sit.Intent, sit.Others, sit.Targets, v.Answers[0], sit.Policies)
	if err != nil {
		return fmt.Errorf("pre-flight of the Hard stage: %w", err)
	}
	v.Disruptions, v.PreflightAsked = d, true
	return nil
}

// FirstBlocking is the first blocking hazard of any answer.
func (v Verdict) FirstBlocking() *placement.Hazard {
	for _, a := range v.Answers {
		if b := a.FirstBlocking(); b != nil {
			return b
		}
	}
	return nil
}

// Hazards are the findings of every answer, each type once per workload,
// as status.hazards records them.
func (v Verdict) Hazards() []pgv1.Hazard {
	return HazardsFromAnswer(UniqueHazards(v.Answers))
}

// Plan is what the stage changes on each target, as status.plan records
// it, and every pod each target's rollout recreates, by target.
func (v Verdict) Plan(ts []*Target) ([]pgv1.TargetPlan, map[string][]string) {
	var plan []pgv1.TargetPlan
	recreated := map[string][]string{}
	for _, t := range ts {
		entry, all := TargetPlan(t, v.Stage, v.Answers)
		if all != nil {
			recreated[t.String()] = all
		}
		plan = append(plan, entry)
	}
	return plan, recreated
}

// OutcomeKind is what a verdict lets the migration do.
type OutcomeKind string

const (
	Proceeds           OutcomeKind = "Proceeds"
	WaitingForCapacity OutcomeKind = "WaitingForCapacity"
	Blocked            OutcomeKind = "Blocked"
)

// Outcome is a verdict's decision, with the reason and message the
// migration's conditions give it.
type Outcome struct {
	Kind            OutcomeKind
	Reason, Message string
}

// EvaluateStages asks the one question about every stage of the
// migration in turn, as if each were next: what plan and lint report.
// A claim by another migration stops at the first.
func EvaluateStages(snap *placement.Snapshot, sit Situation) ([]Verdict, error) {
	var out []Verdict
	for _, stage := range Stages(sit.Intent.Final) {
		v, err := Evaluate(snap, sit, stage)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		if v.Claim != nil {
			break
		}
	}
	return out, nil
}

// sharedProfile is the profile an answer predicted every workload with,
// "" when they name different ones.
func sharedProfile(a placement.Answer) string {
	shared := ""
	for _, name := range a.Profiles {
		if shared != "" && name != shared {
			return ""
		}
		shared = name
	}
	return shared
}
