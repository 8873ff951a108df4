package controller

import (
	"context"

	"github.com/placement-guard/placement-guard/internal/metrics"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// The hard stage's pre-flight is the second part of the one question
// asked before it (planning.Evaluate); the operator asks it once the pods
// are stable too, and the guards say what its verdict does.

// intent is what the migration sets out to do, as the one question asks
// it, with the targets its status says it holds now: a write made during
// this reconcile counts.
func (s *scope) intent() planning.Intent { return planning.IntentOf(s.pm) }

// situation is what the one question about the group hangs on.
func (s *scope) situation(group []*target) planning.Situation {
	return planning.Situation{Intent: s.intent(), Targets: planned(group), Others: s.others, Companions: s.companions()}
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
	return s.r.State.With(ctx, func(snap *placement.Snapshot) error { return v.AskPreflight(snap, sit) })
}
