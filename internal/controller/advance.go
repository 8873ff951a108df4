package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/metrics"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// advance takes the checks that come before every stage, in order, and
// records the intent to apply it when they pass: no other migration holds
// the field or has a write in flight, capacity, feasibility of this stage
// and of the final one, stable pods, the server-side dry run and the
// protected pods, the write budget. A stage that only lowers the
// constraint to the final stage (the spec lowered it) needs none of the
// checks about capacity and pods.
func (s *scope) advance(ctx context.Context, group []*target, stage placement.Stage) (outcome, error) {
	pm := s.pm
	final := placement.Stage(pm.Spec.Final())
	if o, ok := s.checkOthers(group); ok {
		return o, nil
	}
	lowering := rank(stage) < rank(s.verified(group[0]))
	if o, ok := s.waitForPaused(group, string(stage)); ok {
		return o, nil
	}
	var answers []placement.Answer
	if !lowering {
		o, stuck, recheck := s.stuckOutside(group)
		if stuck {
			return o, nil
		}
		s.lookAgainIn(recheck)
		stages := []placement.Stage{stage}
		if stage != final {
			stages = append(stages, final)
		}
		var err error
		if answers, err = s.analyze(group, stages); err != nil {
			return outcome{}, err
		}
		if o, ok := s.checkCapacity(answers[0].Capacity, stage); ok {
			return o, nil
		}
		if o, ok, err := s.checkFeasible(ctx, answers, stages); ok || err != nil {
			return o, err
		}
		if o, ok := s.checkPodsStable(group); ok {
			return o, nil
		}
	}
	var warnings []note
	if stage == placement.StageHard && !lowering {
		v, err := s.preflightDisruptions(ctx, group, answers[0])
		if err != nil {
			return outcome{}, err
		}
		o, blocked := s.applyPreflight(v)
		if blocked {
			return o, nil
		}
		warnings = o.events
	}
	plan, recreated, o, blocked, err := s.plan(ctx, group, stage, answers)
	if err != nil || blocked {
		return o, err
	}
	pm.Status.Plan = plan
	protected, err := s.protectedPods()
	if err != nil {
		return outcome{}, err
	}
	if hit := recreatesProtected(recreated, protected); hit != "" {
		return outcome{blocked: true, reason: pgv1.ReasonProtectedPodChanged, message: fmt.Sprintf(
			"The %s stage would recreate protected pod(s) %s; remove the workload from the targets or the pods from guards.protectedPods", stage, hit)}, nil
	}
	if pm.Spec.DryRun {
		return outcome{done: true, reason: pgv1.ReasonPlanned, message: planSummary(stage, plan) + "; dry run, nothing was changed"}, nil
	}
	for _, t := range group {
		if !s.r.Budget.Allow(s.key(t.Ref), s.now) {
			return s.budgetExceeded(t.Ref), nil
		}
	}
	op := s.newOperation(pgv1.ActionApplyStage, s.verified(group[0]), stage)
	for _, t := range group {
		op.Targets = append(op.Targets, s.operationTarget(t, t.entry(stage), s.currentEntry(t)))
	}
	pm.Status.ProtectedPods = protectedRecordOf(protected, s.now)
	setCondition(pm, s.now, stageCondition(stage), metav1.ConditionFalse, pgv1.ReasonIntentRecorded, fmt.Sprintf("The %s stage is recorded and about to be written", stage))
	return s.recordIntent(op, outcome{reason: pgv1.ReasonIntentRecorded,
		message: fmt.Sprintf("Recorded the %s stage for %s; writing it next", stage, targetNames(group)), events: warnings}), nil
}

// currentEntry is the migration's entry the target carries now, which a
// rollback of the next write restores.
func (s *scope) currentEntry(t *target) *corev1.PodSpec {
	ts := s.status(t.Ref)
	if ts.Applied != nil && placement.Carries(&t.Template().Spec, entryOf(ts.Applied)) {
		return entryOf(ts.Applied)
	}
	return t.entry(t.Rendered.StageOf(&t.Template().Spec, t.Selector()))
}

// checkOthers waits for, or stops before, the other migrations of the
// group's targets.
func (s *scope) checkOthers(group []*target) (outcome, bool) {
	refs := make([]pgv1.TargetRef, len(group))
	for i, t := range group {
		refs[i] = t.Ref
	}
	if claim := planning.ClaimOf(s.pm, s.others, refs); claim != nil {
		return outcome{blocked: true, reason: pgv1.ReasonTargetClaimed, message: claim.Message()}, true
	}
	if name, t := s.inFlightOn(group); name != "" {
		return outcome{reason: pgv1.ReasonWaitingForMigration, message: fmt.Sprintf(
			"Waiting for PlacementMigration %s, which has a write in flight on %s: one migration changes a workload at a time", name, t)}, true
	}
	return outcome{}, false
}

// analyze asks the engine about each stage, against one snapshot. Each
// workload is judged with the other migrations' constraints present at
// their final stage, so that two compatible migrations do not each pass
// on a cluster that cannot hold both.
func (s *scope) analyze(group []*target, stages []placement.Stage) ([]placement.Answer, error) {
	workloads := make([]*placement.Workload, len(group))
	for i, t := range group {
		workloads[i] = s.withOthers(t)
	}
	var answers []placement.Answer
	err := s.r.State.With(func(snap *placement.Snapshot) error {
		var err error
		capacity := planning.CapacityFromSpec(s.pm.Spec.Capacity)
		q := placement.Question{Workloads: workloads, Constraint: s.constraint, Capacity: capacity, Companions: s.companions()}
		if answers, err = planning.Ask(snap, q, stages); err != nil {
			return err
		}
		if s.pm.Spec.Capacity.ProvisionMode() == pgv1.ProvisionNone {
			return nil
		}
		final := placement.Stage(s.pm.Spec.Final())
		req, err := snap.RequestCapacity(workloads, s.constraint, capacity, final, answers[len(answers)-1], s.requestSpec())
		if err != nil {
			return fmt.Errorf("compute the capacity request: %w", err)
		}
		s.request = &req
		if s.asked != nil {
			s.launched = snap.LaunchedFor(req, s.asked.Since.Time)
		}
		return nil
	})
	for _, a := range answers {
		metrics.ObserveEvaluation(a.Duration)
	}
	return answers, err
}

// withOthers is the target's workload with the final stage of every other
// compatible migration of it added to the template.
func (s *scope) withOthers(t *target) *placement.Workload {
	return planning.WithOthers(s.pm, s.others, t.Target)
}
