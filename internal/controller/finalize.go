package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/metrics"
)

// finalize takes the migration's deletion costs off its targets' pods,
// restores, for onDelete: Revert, what the targets had before the
// migration, then lets the migration go. The revert is a recorded
// operation like any write; it replaces an operation in flight, whose
// targets it reverts too. Releasing the migration's fields gives back the
// template as found, other managers' and other migrations' fields intact.
func (s *scope) finalize(ctx context.Context) (outcome, error) {
	pm := s.pm
	metrics.Forget(pm.Namespace, pm.Name)
	var left []note
	if controllerutil.ContainsFinalizer(pm, pgv1.DeletionCostFinalizer) {
		rb := s.rebalance(ctx)
		remaining, err := rb.RemoveCosts(ctx)
		if e, forbidden := rb.CostsLeftBehind(err); forbidden {
			left, remaining = append(left, note{kind: e.Type, reason: e.Reason, message: e.Message}), 0
		} else if err != nil {
			return outcome{}, err
		}
		if remaining > 0 {
			s.lookAgainIn(staleRetry)
			return outcome{reason: pgv1.ReasonTargetRemoved, message: fmt.Sprintf("Deleting: removing the deletion costs from %d pod(s)", remaining)}, nil
		}
		if err := rb.DropFinalizer(ctx); err != nil {
			return outcome{}, stale(err)
		}
	}
	o, err := s.revertOnDelete(ctx)
	if len(left) > 0 {
		o.silent, o.reason, o.events = false, pgv1.ReasonTargetRemoved, append(left, o.events...)
	}
	return o, err
}

// revertOnDelete reverts the targets of a deleted migration whose onDelete
// is Revert, then takes the revert finalizer off.
func (s *scope) revertOnDelete(ctx context.Context) (outcome, error) {
	pm := s.pm
	if !controllerutil.ContainsFinalizer(pm, pgv1.RevertFinalizer) {
		return outcome{silent: true}, nil
	}
	op := pm.Status.Operation
	if op == nil || op.Action != pgv1.ActionRevert {
		revert := s.newOperation(pgv1.ActionRevert, s.weakestRecorded(), pgv1.StageNone)
		for _, ts := range pm.Status.Targets {
			if ts.Applied != nil || (ts.Stage != "" && ts.Stage != pgv1.StageNone) {
				revert.Targets = append(revert.Targets, pgv1.OperationTarget{Kind: ts.Kind, Name: ts.Name, UID: ts.UID, Previous: ts.Applied})
			}
		}
		if op != nil {
			for _, ot := range op.Targets {
				if !hasTarget(revert, ot.Kind, ot.Name) {
					revert.Targets = append(revert.Targets, pgv1.OperationTarget{Kind: ot.Kind, Name: ot.Name, UID: ot.UID, Previous: ot.Entry})
				}
			}
		}
		if len(revert.Targets) > 0 {
			return s.recordIntent(revert, outcome{reason: pgv1.ReasonTargetRemoved,
				message: fmt.Sprintf("Deleting: removing the constraint from %d workload(s) (onDelete: Revert)", len(revert.Targets))}), nil
		}
	} else if len(unwritten(op)) > 0 {
		return s.write(ctx, op, unwritten(op))
	}
	// Locked to the migration as read: a finalizer list changed since (a
	// user's, another controller's) is read again, not overwritten.
	patch := client.MergeFromWithOptions(pm.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(pm, pgv1.RevertFinalizer)
	if err := s.r.Patch(ctx, pm, patch); err != nil {
		if apierrors.IsConflict(err) {
			return outcome{}, fmt.Errorf("remove finalizer of PlacementMigration %s/%s: %w", pm.Namespace, pm.Name, errStale)
		}
		return outcome{}, fmt.Errorf("remove finalizer of PlacementMigration %s/%s: %w", pm.Namespace, pm.Name, err)
	}
	n := 0
	if op != nil {
		n = len(op.Targets)
	}
	return outcome{reason: pgv1.ReasonTargetRemoved,
		events: []note{{kind: corev1.EventTypeNormal, reason: "Reverted", message: fmt.Sprintf("Removed the constraint from %d workload(s) (onDelete: Revert)", n)}}}, nil
}

func hasTarget(op *pgv1.Operation, kind pgv1.WorkloadKind, name string) bool {
	for _, ot := range op.Targets {
		if ot.Kind == kind && ot.Name == name {
			return true
		}
	}
	return false
}

// weakestRecorded is the weakest stage status records on any target.
func (s *scope) weakestRecorded() pgv1.Stage {
	weakest := pgv1.StageHard
	for _, ts := range s.pm.Status.Targets {
		if ts.Stage.Rank() < weakest.Rank() {
			weakest = ts.Stage
		}
	}
	return weakest
}

// syncFinalizer keeps the revert finalizer exactly on migrations whose
// onDelete is Revert, and adds the deletion-cost finalizer before a
// migration that keeps deletion costs writes one (it comes off only once
// the costs are, in keepDeletionCosts or finalize).
func (r *PlacementMigrationReconciler) syncFinalizer(ctx context.Context, pm *pgv1.PlacementMigration) error {
	if !pm.DeletionTimestamp.IsZero() {
		return nil
	}
	revert := pm.Spec.OnDelete == pgv1.DeletionRevert
	costs := pm.Spec.KeepsDeletionCosts()
	addCosts := costs && !controllerutil.ContainsFinalizer(pm, pgv1.DeletionCostFinalizer)
	if revert == controllerutil.ContainsFinalizer(pm, pgv1.RevertFinalizer) && !addCosts {
		return nil
	}
	// Locked to the migration as read: a stale read (onDelete since set to
	// Revert with the finalizer, as kubectl placement abort does in one
	// write) must not take the finalizer off.
	patch := client.MergeFromWithOptions(pm.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if revert {
		controllerutil.AddFinalizer(pm, pgv1.RevertFinalizer)
	} else {
		controllerutil.RemoveFinalizer(pm, pgv1.RevertFinalizer)
	}
	if addCosts {
		controllerutil.AddFinalizer(pm, pgv1.DeletionCostFinalizer)
	}
	replaced := pm.ResourceVersion
	if err := r.Patch(ctx, pm, patch); err != nil {
		if apierrors.IsConflict(err) {
			return fmt.Errorf("update finalizer of PlacementMigration %s/%s: %w", pm.Namespace, pm.Name, errStale)
		}
		return fmt.Errorf("update finalizer of PlacementMigration %s/%s: %w", pm.Namespace, pm.Name, err)
	}
	r.own.wrote(client.ObjectKeyFromObject(pm), replaced, pm.ResourceVersion)
	return nil
}
