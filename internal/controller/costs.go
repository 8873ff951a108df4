package controller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/placement-guard/placement-guard/internal/controller/rebalance"
)

// rebalance is the rebalance step (spec.rebalance) of this reconcile, on
// the migration and targets it read.
func (s *scope) rebalance(ctx context.Context) *rebalance.Step {
	return &rebalance.Step{Client: s.r.Client, State: s.r.State, Migration: s.pm, Others: s.others,
		Targets: planned(s.targets), Constraint: s.constraint, Now: s.now, Settled: s.targetsSettled(ctx)}
}

// keepDeletionCosts runs the rebalance step after the migration's own:
// the costs and moves the outcome calls for, told as Events of the
// outcome.
func (s *scope) keepDeletionCosts(ctx context.Context, o outcome) (outcome, error) {
	if !s.pm.DeletionTimestamp.IsZero() || o.silent {
		return o, nil
	}
	res, err := s.rebalance(ctx).Keep(ctx, o.done, o.degraded)
	o = s.told(o, res)
	return o, stale(err)
}

// told adds what the rebalance step has the reconciler tell and do.
func (s *scope) told(o outcome, res rebalance.Result) outcome {
	for _, e := range res.Events {
		o.events = append(o.events, note{kind: e.Type, reason: e.Reason, message: e.Message})
	}
	if res.After > 0 {
		s.lookAgainIn(res.After)
	}
	return o
}

// stale makes a conflict of the rebalance step's own writes (the
// finalizer) a read to take again.
func stale(err error) error {
	if err != nil && apierrors.IsConflict(err) {
		return fmt.Errorf("%w: %w", err, errStale)
	}
	return err
}
