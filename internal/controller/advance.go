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
	if o, ok := s.checkOthers(group); ok {
		return o, nil
	}
	lowering := rank(stage) < rank(s.verified(group[0]))
	if o, ok := s.waitForPaused(group, string(stage)); ok {
		return o, nil
	}
	verdict := planning.Verdict{Stage: stage}
	if !lowering {
		o, stuck, recheck := s.stuckOutside(group)
		if stuck {
			return o, nil
		}
		s.lookAgainIn(recheck)
	}
	if o, ok := s.waitForCompleteView(group); ok {
		return o, nil
	}
	if !lowering {
		var err error
		if verdict, err = s.evaluate(group, stage); err != nil {
			return outcome{}, err
		}
		if verdict.Claim != nil {
			return outcome{blocked: true, reason: pgv1.ReasonTargetClaimed, message: verdict.Claim.Message()}, nil
		}
		if o, ok := s.checkCapacity(verdict.Answers[0].Capacity, stage); ok {
			return o, nil
		}
		if o, ok, err := s.checkFeasible(ctx, verdict); ok || err != nil {
			return o, err
		}
		if o, ok := s.checkPodsStable(group); ok {
			return o, nil
		}
	}
	var warnings []note
	if !lowering && verdict.PreflightDue(pm) {
		if err := s.preflight(ctx, group, &verdict); err != nil {
			return outcome{}, err
		}
		o, blocked := s.applyPreflight(verdict.Disruptions)
		if blocked {
			return o, nil
		}
		warnings = o.events
	}
	plan, recreated, o, blocked, err := s.plan(ctx, group, verdict)
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

// evaluate asks the one question (planning.Evaluate) about the stage,
// against one snapshot, and the capacity the final stage would ask the
// autoscaler for.
func (s *scope) evaluate(group []*target, stage placement.Stage) (planning.Verdict, error) {
	var v planning.Verdict
	err := s.r.State.With(func(snap *placement.Snapshot) error {
		var err error
		if v, err = planning.AskStage(snap, s.situation(group), stage); err != nil || v.Claim != nil {
			return err
		}
		if s.pm.Spec.Capacity.ProvisionMode() == pgv1.ProvisionNone {
			return nil
		}
		final := placement.Stage(s.pm.Spec.Final())
		req, err := snap.RequestCapacity(v.Workloads, s.constraint, planning.CapacityFromSpec(s.pm.Spec.Capacity), final, v.Answers[len(v.Answers)-1], s.requestSpec())
		if err != nil {
			return fmt.Errorf("compute the capacity request: %w", err)
		}
		s.request = &req
		if s.asked != nil {
			s.launched = snap.LaunchedFor(req, s.asked.Since.Time)
		}
		return nil
	})
	for _, a := range v.Answers {
		metrics.ObserveEvaluation(a.Duration)
	}
	return v, err
}
