package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// step takes the one step the migration needs next, chosen from the
// operation journal, the milestones recorded per target and the cluster
// as it is. Each step either records an intent, makes the write a recorded
// intent names, verifies it, or reports what the migration waits for; the
// reconcile after it takes the next. A stage's verification is the one
// step followed at once by the next in the same reconcile (the soak,
// success, the next stage's intent): it writes nothing to the cluster,
// so the status is written once for both, and the verification is told
// as an Event of its own.
func (s *scope) step(ctx context.Context) (outcome, error) {
	pm := s.pm
	if !pm.DeletionTimestamp.IsZero() {
		return s.finalize(ctx)
	}
	if stop := planning.TooManyTargets(s.selected); stop != nil {
		// Before anything else: the status cannot record the targets.
		return stopOutcome(*stop), nil
	}
	s.observeTargets()
	if s.retryRequested() {
		return s.retry(), nil
	}
	if pm.Spec.Paused {
		return outcome{reason: pgv1.ReasonPaused,
			message: fmt.Sprintf("Paused with the %s stage verified; nothing is patched until spec.paused is false", s.weakestVerified())}, nil
	}
	if op := pm.Status.Operation; op.Held() {
		return s.continueHeld(ctx, op)
	} else if op != nil {
		o, err := s.continueOperation(ctx, op)
		if err != nil || o.reason != pgv1.ReasonStageVerified || pm.Status.Operation != nil {
			return o, err
		}
		s.justVerified = true
		next, err := s.settled(ctx)
		next.events = append([]note{{kind: corev1.EventTypeNormal, reason: o.reason, message: o.message}}, append(o.events, next.events...)...)
		return next, err
	}
	return s.settled(ctx)
}

// settled takes the next step of a migration with no operation in flight.
func (s *scope) settled(ctx context.Context) (outcome, error) {
	pm := s.pm
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
func (s *scope) verified(t *target) pgv1.Stage {
	return planning.VerifiedStage(s.status(t.Ref), t.Target)
}

// weakestVerified is the stage verified on every target.
func (s *scope) weakestVerified() pgv1.Stage {
	if len(s.targets) == 0 {
		return pgv1.StageNone
	}
	return planning.Weakest(s.pm, planned(s.targets))
}

// nextGroup chooses the targets to move next and the stage to move them
// to: the targets at the weakest verified stage, towards the next stage
// but never beyond the final one; a target beyond the final stage (the
// spec lowered it) is brought back to it. Targets still soaking hold the
// group until their soak is over.
func (s *scope) nextGroup() ([]*target, pgv1.Stage) {
	weakest := planning.Weakest(s.pm, planned(s.targets))
	var group []*target
	for _, t := range s.targets {
		if s.verified(t) == weakest {
			group = append(group, t)
		}
	}
	next := planning.NextStage(weakest, s.pm.Spec.Final())
	if next == "" || (weakest == pgv1.StageSoft && next == pgv1.StageHard && !s.soaked(group)) {
		return nil, ""
	}
	return group, next
}
