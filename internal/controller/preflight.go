package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/metrics"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// The hard stage's pre-flight is the second part of the one question
// asked before it (planning.Evaluate); the operator asks it once the pods
// are stable too, and the guards say what its verdict does.

// situation is what the one question about the group hangs on.
func (s *scope) situation(group []*target) planning.Situation {
	return planning.Situation{Migration: s.pm, Targets: planned(group), Others: s.others, Companions: s.companions()}
}

// preflight asks the pre-flight of a verdict it is due for, with the
// namespace's PodDisruptionBudgets and HorizontalPodAutoscalers.
func (s *scope) preflight(ctx context.Context, group []*target, v *planning.Verdict) error {
	sit := s.situation(group)
	var err error
	if sit.Policies, err = s.disruptionPolicies(ctx); err != nil {
		return err
	}
	metrics.CountDisruptionSimulation()
	return s.r.State.With(func(snap *placement.Snapshot) error { return v.AskPreflight(snap, sit) })
}

// applyPreflight turns the verdict into what the policy asks: a Block
// before the hard stage, or a Warning Event with the stage's outcome.
func (s *scope) applyPreflight(v planning.DisruptionVerdict) (outcome, bool) {
	if v.OK {
		return outcome{}, false
	}
	if s.pm.Spec.DisruptionCheck() == pgv1.DisruptionBlock {
		return outcome{blocked: true, reason: v.Reason,
			message: v.Message + "; the Soft stage stays applied (guards.disruptions: Block; set Warn to apply the Hard stage anyway)"}, true
	}
	return outcome{events: []note{{kind: corev1.EventTypeWarning, reason: v.Reason,
		message: v.Message + " (guards.disruptions: Warn: the Hard stage is applied)"}}}, false
}
