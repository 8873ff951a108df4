package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/brief"
	"github.com/placement-guard/placement-guard/internal/metrics"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// advance gathers the facts the one decision (planning.Decide) hangs on
// and asks it once about the stage, handing it the engine and the
// pre-flight to ask only when no fact holds the stage (stageQuestion); when
// the decision is to proceed it runs the server-side dry run and the write
// budget, and records the intent to apply the stage. A stage that only
// lowers the constraint to the final stage (the spec lowered it) needs no
// answer about capacity and pods.
func (s *scope) advance(ctx context.Context, group []*target, stage pgv1.Stage) (outcome, error) {
	pm := s.pm
	sd, err := s.decideStage(ctx, group, stage, s.now)
	if err != nil {
		return outcome{}, err
	}
	d := sd.Decision
	if s.waitedForPodView(d) {
		if v := sd.facts.PodView; v != nil {
			s.viewCatchingUp, s.viewCause = v.CatchingUp, !v.CatchingUp
		}
		o := outcomeOf(d)
		o.after, o.capacity = podViewRecheck, holdRequest
		return o, nil
	}
	if d.Blocking != nil && d.Blocking.Type == placement.HazardAffinityClobber {
		owners, err := s.placementOwners(ctx, d.Blocking.Workload)
		if err != nil {
			return outcome{}, err
		}
		if owners != "" {
			d = d.Detailed("; those fields are written by field manager " + owners)
		}
	}
	s.record(d)
	if d.Feasible != nil && d.Feasible.Status == metav1.ConditionTrue {
		// The decision reached the pods.
		s.recordPods(sd.facts.Unstable, sd.podsStableAt)
	}
	if d.Kind != planning.Proceeds {
		o := outcomeOf(d)
		o.capacity = capacityNeedOf(d, sd.facts.Lowers)
		return o, nil
	}
	for _, t := range group {
		if o, refused, err := s.dryRun(ctx, t, t.Entry(stage), stage); refused || err != nil {
			return o, err
		}
	}
	if pm.Spec.DryRun {
		return outcome{done: true, reason: pgv1.ReasonPlanned, message: planSummary(stage, d.Plan) + "; dry run, nothing was changed"}, nil
	}
	for _, t := range group {
		if !s.r.Budget.Allow(s.key(t.Ref), s.now) {
			return s.budgetExceeded(t.Ref), nil
		}
	}
	pm.Status.ProtectedPods = protectedRecordOf(sd.protected, s.now)
	setCondition(pm, s.now, stageCondition(stage), metav1.ConditionFalse, pgv1.ReasonIntentRecorded, fmt.Sprintf("The %s stage is recorded and about to be written", stage))
	return s.recordIntent(s.stageOperation(group, stage), outcome{reason: pgv1.ReasonIntentRecorded,
		message: fmt.Sprintf("Recorded the %s stage for %s; writing it next", stage, targetNames(group)), events: warningsOf(d)}), nil
}

// stageDecision is the one decision about a stage, with the facts it
// hung on.
type stageDecision struct {
	planning.Decision
	facts planning.Facts
	// podsStableAt is when the pods are stable, when they are not yet.
	podsStableAt time.Time
	// protected are the pods guards.protectedPods selects.
	protected []*corev1.Pod
}

// decideStage gathers the facts and asks the one decision about the
// stage, were it written at writeAt: the pods are judged as stable or not
// then (their age), the rest as they are now.
func (s *scope) decideStage(ctx context.Context, group []*target, stage pgv1.Stage, writeAt time.Time) (stageDecision, error) {
	facts := s.othersOn(group)
	facts.Paused, facts.Selected = pausedTargets(group), s.selected
	facts.Lowers = stage.Rank() < s.verified(group[0]).Rank()
	var sd stageDecision
	if !facts.Lowers {
		facts.Outside, facts.PodView = s.outsideCause(group), s.podView(group)
		facts.Unstable, sd.podsStableAt = s.podsUnstable(group, writeAt)
	}
	protected, err := s.protectedPods()
	if err != nil {
		return stageDecision{}, err
	}
	facts.Protected = planning.ProtectedNames(protected)
	d, err := planning.Decide(s.situation(group), stage, facts, stageQuestion{s: s, ctx: ctx, group: group})
	if err != nil {
		return stageDecision{}, err
	}
	sd.Decision, sd.facts, sd.protected = d, facts, protected
	return sd, nil
}

// stageOperation is the operation that writes the stage into the group.
func (s *scope) stageOperation(group []*target, stage pgv1.Stage) *pgv1.Operation {
	op := s.newOperation(pgv1.ActionApplyStage, s.verified(group[0]), stage)
	for _, t := range group {
		op.Targets = append(op.Targets, s.operationTarget(t, t.Entry(stage), s.currentEntry(t)))
	}
	return op
}

// capacityNeedOf is what a decision not to proceed asks of the capacity
// request: kept to the answer while it waits for capacity, left standing
// while a fact holds the stage before the engine could be asked again,
// let go when the decision is blocked or found the capacity.
func capacityNeedOf(d planning.Decision, lowers bool) capacityNeed {
	switch {
	case d.Kind == planning.WaitingForCapacity:
		return askForCapacity
	case d.Kind == planning.Waiting && len(d.Verdict.Answers) == 0 && !lowers:
		return holdRequest
	}
	return noCapacityNeed
}

// stageQuestion is the one question about the group, as the decision
// asks it of the operator's warm snapshot.
type stageQuestion struct {
	s     *scope
	ctx   context.Context
	group []*target
}

func (q stageQuestion) Stage(stage pgv1.Stage) (planning.Verdict, error) {
	return q.s.evaluate(q.ctx, q.group, stage)
}

func (q stageQuestion) Preflight(v *planning.Verdict) error {
	return q.s.preflight(q.ctx, q.group, v)
}

// othersOn is what the other migrations hold of the group besides a
// claim, which the decision reads from the situation: a write in flight.
func (s *scope) othersOn(group []*target) planning.Facts {
	var facts planning.Facts
	if name, t := s.inFlightOn(group); name != "" {
		facts.InFlight, facts.InFlightOn = name, t.String()
	}
	return facts
}

// checkOthers waits for, or stops before, the other migrations of the
// group's targets, as the decision says: a step that writes no new stage
// asks only what holds one.
func (s *scope) checkOthers(group []*target) (outcome, bool) {
	if d, held := planning.Held(s.situation(group), "", s.othersOn(group)); held {
		return outcomeOf(d), true
	}
	return outcome{}, false
}

// record writes into the status what the decision found: the capacity,
// the hazards and feasibility once the capacity is there, the plan once
// the decision reached it.
func (s *scope) record(d planning.Decision) {
	pm := s.pm
	v := d.Verdict
	if len(v.Answers) > 0 {
		pm.Status.SchedulerProfile = v.Profile
		c := v.Answers[0].Capacity
		nodes := c.Nodes
		if len(nodes) > 10 {
			nodes = nodes[:10]
		}
		var launched []string
		if pm.Status.Capacity != nil {
			launched = pm.Status.Capacity.LaunchedNodes
		}
		pm.Status.Capacity = &pgv1.CapacityStatus{
			QualifyingNodes: int32(c.QualifyingNodes), RequiredNodes: int32(c.RequiredNodes),
			QualifyingDomains: int32(c.QualifyingDomains), RequiredDomains: int32(c.RequiredDomains),
			Nodes: nodes, Summary: c.Summary(), LaunchedNodes: launched,
		}
		if c.Enough() {
			pm.Status.Hazards = v.Hazards()
		} else {
			meta.RemoveStatusCondition(&pm.Status.Conditions, pgv1.ConditionFeasible)
			pm.Status.Hazards = nil
		}
	}
	for _, m := range []*planning.Milestone{d.Capacity, d.Feasible} {
		if m != nil {
			setCondition(pm, s.now, m.Type, m.Status, m.Reason, brief.Truncate(m.Message, 2048))
		}
	}
	if d.Plan != nil {
		pm.Status.Plan = d.Plan
	}
}

// stopOutcome is the reconcile's outcome of a stop.
func stopOutcome(st planning.Stop) outcome {
	return outcome{blocked: st.Blocked, reason: st.Reason, message: brief.Truncate(st.Message, 2048)}
}

// outcomeOf is the reconcile's outcome of a decision not to proceed.
func outcomeOf(d planning.Decision) outcome {
	switch d.Kind {
	case planning.Blocked:
		return outcome{blocked: true, reason: d.Reason, message: brief.Truncate(d.Message, 2048)}
	case planning.WaitingForCapacity:
		return outcome{reason: pgv1.ReasonWaitingForCapacity, message: brief.Truncate(d.Message, 2048)}
	}
	return outcome{reason: d.Reason, message: d.Message}
}

// warningsOf are the Events a decision to proceed carries.
func warningsOf(d planning.Decision) []note {
	if d.Warning == nil {
		return nil
	}
	return []note{{kind: d.Warning.Type, reason: d.Warning.Reason, message: d.Warning.Message}}
}

func refsOf(group []*target) []pgv1.TargetRef {
	refs := make([]pgv1.TargetRef, len(group))
	for i, t := range group {
		refs[i] = t.Ref
	}
	return refs
}

// currentEntry is the migration's entry the target carries now, which a
// rollback of the next write restores.
func (s *scope) currentEntry(t *target) *corev1.PodSpec {
	ts := s.status(t.Ref)
	if ts.Applied != nil && placement.Carries(&t.Template().Spec, planning.EntryOf(ts.Applied)) {
		return planning.EntryOf(ts.Applied)
	}
	return t.Entry(t.Rendered.StageOf(&t.Template().Spec, t.Selector()))
}

// evaluate asks the one question (planning.AskStage) about the stage,
// against one snapshot: with the capacity request the migration would
// make, and how many nodes launched for the request it has already made.
func (s *scope) evaluate(ctx context.Context, group []*target, stage pgv1.Stage) (planning.Verdict, error) {
	var v planning.Verdict
	err := s.r.State.With(ctx, func(snap *placement.Snapshot) error {
		var err error
		sit := s.situation(group)
		if v, err = planning.AskStage(snap, sit, stage); err != nil || v.Request == nil {
			return err
		}
		s.request = v.Request
		if s.asked != nil {
			s.launched, err = snap.LaunchedFor(v.Workloads[0], sit.Intent.Capacity, s.asked.Since.Time, s.r.baselines.existed(client.ObjectKeyFromObject(s.pm), s.asked.Since.Time))
		} else if v.Request.Shortfall > 0 {
			s.nodes = snap.NodeNames()
		}
		return err
	})
	for _, a := range v.Answers {
		metrics.ObserveEvaluation(a.Duration)
	}
	return v, err
}
