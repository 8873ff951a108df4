package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/metrics"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// After success, a migration with spec.rebalance.mode DeletionCost keeps
// the pods of its Deployment targets ranked so that a scale-down removes
// pods from the most crowded domains first: the ReplicaSet controller's
// own choice knows nothing of zones. Planning says which costs keep the
// spread (planning.Rankings), as plan shows them; this file writes them, a bounded
// number per reconcile, records the Balanced condition, and takes the
// costs off again when the mode is Off or the migration is deleted. The
// finalizer is added before the first cost is written and removed after
// the last is taken off, so no crash leaves costs nobody removes.

// maxCostWrites bounds the pod writes of one reconcile; the next reconcile
// makes the rest.
const maxCostWrites = 20

// keepDeletionCosts keeps the costs the outcome calls for: written after
// success while the mode asks for them, removed otherwise.
func (s *scope) keepDeletionCosts(ctx context.Context, o outcome) (outcome, error) {
	pm := s.pm
	if !pm.DeletionTimestamp.IsZero() || o.silent {
		return o, nil
	}
	if pm.Spec.RebalanceMode() != pgv1.RebalanceEvict {
		// A pod already evicted is replaced by its controller whatever
		// the operator does: nothing of a move is left to finish.
		pm.Status.Rebalance = nil
	}
	if s.ranksPods() {
		if !o.done && !o.degraded {
			// While a stage is at work the pods are being replaced: the
			// ranking is kept once the migration has succeeded again.
			return o, nil
		}
		return s.rankPods(ctx, o)
	}
	if !controllerutil.ContainsFinalizer(pm, pgv1.DeletionCostFinalizer) {
		meta.RemoveStatusCondition(&pm.Status.Conditions, pgv1.ConditionBalanced)
		return o, nil
	}
	left, err := s.removeDeletionCosts(ctx)
	if n, forbidden := s.costsLeftBehind(err); forbidden {
		o.events = append(o.events, n)
	} else if err != nil || left > 0 {
		s.lookAgainIn(staleRetry)
		return o, err
	}
	meta.RemoveStatusCondition(&pm.Status.Conditions, pgv1.ConditionBalanced)
	metrics.ForgetSkew(pm.Namespace, pm.Name)
	return o, s.dropCostFinalizer(ctx)
}

// ranksPods reports a migration whose spec asks it to keep deletion costs.
func (s *scope) ranksPods() bool {
	return s.pm.Spec.KeepsDeletionCosts()
}

// rankPods writes the costs the engine asks for and records how the
// targets stand in the Balanced condition.
func (s *scope) rankPods(ctx context.Context, o outcome) (outcome, error) {
	var rankings []planning.Ranking
	err := s.r.State.With(func(snap *placement.Snapshot) error {
		var err error
		rankings, err = planning.Rankings(snap, s.pm, s.others, planned(s.targets))
		return err
	})
	if err != nil {
		return o, err
	}
	changes := planning.CostChanges(rankings)
	written, refused := s.writeCosts(ctx, changes)
	metrics.CountDeletionCostWrites(s.pm.Namespace, s.pm.Name, "written", written)
	for _, r := range rankings {
		metrics.RecordSkew(s.pm.Namespace, s.pm.Name, r.Target.String(), r.Measured.Skew)
	}
	if written < len(changes) && refused == nil {
		s.lookAgainIn(staleRetry)
	}
	status, reason := metav1.ConditionTrue, pgv1.ReasonDeletionCostsKept
	switch {
	case refused != nil:
		metrics.CountDeletionCostWrites(s.pm.Namespace, s.pm.Name, "refused", 1)
		status, reason = metav1.ConditionFalse, pgv1.ReasonDeletionCostRefused
		// A refusal is not an error to back off from: the condition names
		// it, and the next change of the pods, or a minute, tries again.
		s.lookAgainIn(30 * time.Second)
	case planning.ForeignCost(rankings) != "":
		status, reason = metav1.ConditionFalse, pgv1.ReasonForeignDeletionCost
	case written < len(changes):
		reason = pgv1.ReasonDeletionCostsWriting
	}
	msg := planning.DescribeRankings(rankings, len(changes)-written, refused, s.pm.Namespace)
	if s.pm.Spec.RebalanceMode() == pgv1.RebalanceEvict && !o.degraded {
		v, err := s.moves(ctx)
		if err != nil {
			return o, err
		}
		if v.event != nil {
			o.events = append(o.events, *v.event)
		}
		// A cost refused or left to its owner outranks a spread found even;
		// anything the moves say outranks the costs.
		if status == metav1.ConditionTrue || v.status != metav1.ConditionTrue {
			status, reason = v.status, v.reason
		}
		msg = v.message + ". " + msg
	}
	if c := meta.FindStatusCondition(s.pm.Status.Conditions, pgv1.ConditionBalanced); c == nil || c.Reason != reason {
		kind := corev1.EventTypeNormal
		if status == metav1.ConditionFalse {
			kind = corev1.EventTypeWarning
		}
		o.events = append(o.events, note{kind: kind, reason: reason, message: msg})
	}
	setCondition(s.pm, s.now, pgv1.ConditionBalanced, status, reason, msg)
	return o, nil
}

// writeCosts makes up to maxCostWrites of the changes; it stops at the
// first refusal, which it returns.
func (s *scope) writeCosts(ctx context.Context, changes []placement.CostChange) (int, error) {
	written := 0
	for _, c := range changes {
		if written == maxCostWrites {
			break
		}
		if err := s.r.patchCost(ctx, c); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				// The pod went, or was re-created under its name: the
				// next plan reads what is there now.
				continue
			}
			logf.FromContext(ctx).Info("A deletion cost was refused", "pod", c.Name, "error", err.Error())
			return written, fmt.Errorf("pod %s: %w", c.Name, err)
		}
		written++
	}
	return written, nil
}

// patchCost writes, or removes, one pod's cost and its mark in one patch,
// on the pod of that uid only.
func (r *PlacementMigrationReconciler) patchCost(ctx context.Context, c placement.CostChange) error {
	value := "null"
	if c.Cost != nil {
		value = fmt.Sprintf("%q", fmt.Sprint(*c.Cost))
	}
	body := fmt.Sprintf(`{"metadata":{"uid":%q,"annotations":{%q:%s,%q:%s}}}`, c.UID, corev1.PodDeletionCost, value, placement.DeletionCostMark, value)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name}}
	return r.Patch(ctx, pod, client.RawPatch(types.MergePatchType, []byte(body)))
}

// removeDeletionCosts takes the migration's costs off its targets' pods, a
// bounded number per reconcile, and returns how many are left.
func (s *scope) removeDeletionCosts(ctx context.Context) (int, error) {
	var changes []placement.CostChange
	err := s.r.State.With(func(snap *placement.Snapshot) error {
		for _, t := range s.targets {
			if planning.RankedByOther(s.pm, s.others, t.Ref) == "" {
				changes = append(changes, snap.ClearDeletionCosts(t.Workload)...)
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	removed, err := s.writeCosts(ctx, changes)
	metrics.CountDeletionCostWrites(s.pm.Namespace, s.pm.Name, "removed", removed)
	if err != nil {
		return len(changes) - removed, fmt.Errorf("remove the deletion costs of PlacementMigration %s/%s: %w", s.pm.Namespace, s.pm.Name, err)
	}
	return len(changes) - removed, nil
}

// costsLeftBehind reports a removal the operator may not make (the opt-in
// role unbound since): holding the migration would keep it forever, and a
// cost left only ranks scale-downs, so it is left, with a Warning saying
// how to take it off.
func (s *scope) costsLeftBehind(err error) (note, bool) {
	if err == nil || !apierrors.IsForbidden(err) {
		return note{}, false
	}
	return note{kind: corev1.EventTypeWarning, reason: pgv1.ReasonDeletionCostRefused, message: fmt.Sprintf(
		"The deletion costs could not be removed (%v); they are left on the targets' pods. Remove them with: kubectl annotate pods -n %s -l <target selector> %s- %s-",
		err, s.pm.Namespace, corev1.PodDeletionCost, placement.DeletionCostMark)}, true
}

// dropCostFinalizer lets the migration go once its costs are off.
func (s *scope) dropCostFinalizer(ctx context.Context) error {
	pm := s.pm
	patch := client.MergeFromWithOptions(pm.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(pm, pgv1.DeletionCostFinalizer)
	if err := s.r.Patch(ctx, pm, patch); err != nil {
		if apierrors.IsConflict(err) {
			return fmt.Errorf("remove the deletion-cost finalizer of PlacementMigration %s/%s: %w", pm.Namespace, pm.Name, errStale)
		}
		return fmt.Errorf("remove the deletion-cost finalizer of PlacementMigration %s/%s: %w", pm.Namespace, pm.Name, err)
	}
	return nil
}
