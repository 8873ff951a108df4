package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// step takes the one step the migration needs next, chosen from the
// operation journal, the milestones recorded per target and the cluster
// as it is. Each step either records an intent, makes the write a recorded
// intent names, verifies it, or reports what the migration waits for; the
// reconcile after it takes the next.
func (s *scope) step(ctx context.Context) (outcome, error) {
	pm := s.pm
	if !pm.DeletionTimestamp.IsZero() {
		return s.finalize(ctx)
	}
	if s.selected > maxTargets {
		return outcome{blocked: true, reason: pgv1.ReasonTooManyTargets, message: fmt.Sprintf(
			"spec.targetSelector selects %d workloads; a migration records at most %d. Narrow the selector or split the migration; nothing was changed", s.selected, maxTargets)}, nil
	}
	s.observeTargets()
	if s.retryRequested() {
		return s.retry(), nil
	}
	if pm.Spec.Paused {
		return outcome{reason: pgv1.ReasonPaused,
			message: fmt.Sprintf("Paused with the %s stage verified; nothing is patched until spec.paused is false", s.weakestVerified())}, nil
	}
	if op := pm.Status.Operation; op != nil {
		return s.continueOperation(ctx, op)
	}
	adoptLegacyHalt(pm)
	if _, halted := terminal(pm); halted {
		return hold(pm), nil
	}
	// An edited spec lifts a halt of an earlier generation.
	pm.Status.Halt = nil
	if gone := s.removed(); len(gone) > 0 {
		return s.releaseRemoved(gone), nil
	}
	if len(s.missing) > 0 {
		return outcome{blocked: true, reason: pgv1.ReasonTargetNotFound, message: missingMessage(s.missing, pm.Namespace)}, nil
	}
	if len(s.targets) == 0 {
		return outcome{blocked: true, reason: pgv1.ReasonNoTargets,
			message: fmt.Sprintf("spec.targetSelector selects no workload in namespace %s; label the workloads or correct the selector", pm.Namespace)}, nil
	}
	if o, ok, err := s.watchDrift(ctx); ok || err != nil {
		return o, err
	}
	if o, ok := s.adoptUnverified(); ok {
		return o, nil
	}
	if group, stage := s.nextGroup(); len(group) > 0 {
		return s.advance(ctx, group, stage)
	}
	return s.soakOrSucceed(ctx)
}

// verified is the stage verified on a target for the current spec: a
// verification of another constraint's entry (the spec changed since)
// counts for nothing.
func (s *scope) verified(t *target) placement.Stage {
	ts := s.status(t.Ref)
	if ts.Verified == nil || ts.Applied == nil {
		return placement.StageNone
	}
	stage := placement.Stage(ts.Verified.Stage)
	if !equalEntries(entryOf(ts.Applied), t.entry(stage)) {
		return placement.StageNone
	}
	return stage
}

// weakestVerified is the stage verified on every target.
func (s *scope) weakestVerified() pgv1.Stage {
	if len(s.targets) == 0 {
		return pgv1.StageNone
	}
	weakest := placement.StageHard
	for _, t := range s.targets {
		if v := s.verified(t); v.Rank() < weakest.Rank() {
			weakest = v
		}
	}
	return pgv1.Stage(weakest)
}

// nextGroup chooses the targets to move next and the stage to move them
// to: the targets at the weakest verified stage, towards the next stage
// but never beyond the final one; a target beyond the final stage (the
// spec lowered it) is brought back to it. Targets still soaking hold the
// group until their soak is over.
func (s *scope) nextGroup() ([]*target, placement.Stage) {
	final := placement.Stage(s.pm.Spec.Final())
	weakest := placement.StageHard
	for _, t := range s.targets {
		if v := s.verified(t); v.Rank() < weakest.Rank() {
			weakest = v
		}
	}
	var group []*target
	for _, t := range s.targets {
		if s.verified(t) == weakest {
			group = append(group, t)
		}
	}
	switch {
	case weakest.Rank() > final.Rank():
		return group, final
	case weakest == final:
		return nil, ""
	case weakest == placement.StageSoft && !s.soaked(group):
		return nil, ""
	}
	return group, nextStage(weakest)
}

func nextStage(st placement.Stage) placement.Stage {
	if st == placement.StageNone {
		return placement.StageSoft
	}
	return placement.StageHard
}

// equalEntries compares two entries as the API server stores them.
func equalEntries(a, b *corev1.PodSpec) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return placement.Carries(a, b) && placement.Carries(b, a)
}
