package rebalance

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

// After success, a migration with spec.rebalance.mode DeletionCost (or
// Evict) keeps the pods of its Deployment targets ranked so that a
// scale-down removes pods from the most crowded domains first: the
// ReplicaSet controller's own choice knows nothing of zones. Planning says
// which costs keep the spread (planning.Rankings), as plan shows them;
// this file writes them, a bounded number per reconcile, records the
// Balanced condition, and takes the costs off again when the mode is Off
// or the migration is deleted. The finalizer is added before the first
// cost is written and removed after the last is taken off, so no crash
// leaves costs nobody removes.

// maxCostWrites bounds the pod writes of one reconcile; the next reconcile
// makes the rest.
const maxCostWrites = 20

// Keep keeps the costs the migration calls for: written after success
// (done, or degraded) while the mode asks for them, kept as they are while
// a stage is at work, removed otherwise.
func (s *Step) Keep(ctx context.Context, done, degraded bool) (Result, error) {
	pm := s.Migration
	if pm.Spec.RebalanceMode() != pgv1.RebalanceEvict {
		// A pod already evicted is replaced by its controller whatever
		// the operator does: nothing of a move is left to finish.
		pm.Status.Rebalance = nil
	}
	if pm.Spec.KeepsDeletionCosts() {
		if !done && !degraded {
			// While a stage is at work the pods are being replaced: the
			// ranking is kept once the migration has succeeded again.
			return s.result, nil
		}
		err := s.rankPods(ctx, degraded)
		return s.result, err
	}
	if !controllerutil.ContainsFinalizer(pm, pgv1.DeletionCostFinalizer) {
		meta.RemoveStatusCondition(&pm.Status.Conditions, pgv1.ConditionBalanced)
		return s.result, nil
	}
	left, err := s.RemoveCosts(ctx)
	if e, forbidden := s.CostsLeftBehind(err); forbidden {
		s.result.Events = append(s.result.Events, e)
	} else if err != nil || left > 0 {
		s.lookAgainIn(retrySoon)
		return s.result, err
	}
	meta.RemoveStatusCondition(&pm.Status.Conditions, pgv1.ConditionBalanced)
	metrics.ForgetSkew(pm.Namespace, pm.Name)
	return s.result, s.DropFinalizer(ctx)
}

// rankPods writes the costs planning asks for and records how the targets
// stand in the Balanced condition, with what the moves of mode Evict say.
func (s *Step) rankPods(ctx context.Context, degraded bool) error {
	pm := s.Migration
	var rankings []planning.Ranking
	err := s.State.With(ctx, func(snap *placement.Snapshot) error {
		var err error
		rankings, err = planning.Rankings(snap, pm, s.Others, s.Targets)
		return err
	})
	if err != nil {
		return err
	}
	changes := planning.CostChanges(rankings)
	written, refused := s.writeCosts(ctx, changes)
	metrics.CountDeletionCostWrites(pm.Namespace, pm.Name, "written", written)
	for _, r := range rankings {
		metrics.RecordSkew(pm.Namespace, pm.Name, r.Target.String(), r.Measured.Skew)
	}
	if written < len(changes) && refused == nil {
		s.lookAgainIn(retrySoon)
	}
	status, reason := metav1.ConditionTrue, pgv1.ReasonDeletionCostsKept
	switch {
	case refused != nil:
		metrics.CountDeletionCostWrites(pm.Namespace, pm.Name, "refused", 1)
		status, reason = metav1.ConditionFalse, pgv1.ReasonDeletionCostRefused
		// A refusal is not an error to back off from: the condition names
		// it, and the next change of the pods, or a minute, tries again.
		s.lookAgainIn(30 * time.Second)
	case planning.ForeignCost(rankings) != "":
		status, reason = metav1.ConditionFalse, pgv1.ReasonForeignDeletionCost
	case written < len(changes):
		reason = pgv1.ReasonDeletionCostsWriting
	}
	msg := planning.DescribeRankings(rankings, len(changes)-written, refused, pm.Namespace)
	if pm.Spec.RebalanceMode() == pgv1.RebalanceEvict && !degraded {
		v, err := s.moves(ctx)
		if err != nil {
			return err
		}
		if v.event != nil {
			s.result.Events = append(s.result.Events, *v.event)
		}
		// A cost refused or left to its owner outranks a spread found even;
		// anything the moves say outranks the costs.
		if status == metav1.ConditionTrue || v.status != metav1.ConditionTrue {
			status, reason = v.status, v.reason
		}
		msg = v.message + ". " + msg
	}
	if c := meta.FindStatusCondition(pm.Status.Conditions, pgv1.ConditionBalanced); c == nil || c.Reason != reason {
		kind := corev1.EventTypeNormal
		if status == metav1.ConditionFalse {
			kind = corev1.EventTypeWarning
		}
		s.tell(kind, reason, msg)
	}
	s.setBalanced(status, reason, msg)
	return nil
}

// writeCosts makes up to maxCostWrites of the changes; it stops at the
// first refusal, which it returns.
func (s *Step) writeCosts(ctx context.Context, changes []placement.CostChange) (int, error) {
	written := 0
	for _, c := range changes {
		if written == maxCostWrites {
			break
		}
		if err := s.patchCost(ctx, c); err != nil {
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
func (s *Step) patchCost(ctx context.Context, c placement.CostChange) error {
	value := "null"
	if c.Cost != nil {
		value = fmt.Sprintf("%q", fmt.Sprint(*c.Cost))
	}
	body := fmt.Sprintf(`{"metadata":{"uid":%q,"annotations":{%q:%s,%q:%s}}}`, c.UID, corev1.PodDeletionCost, value, placement.DeletionCostMark, value)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name}}
	return s.Client.Patch(ctx, pod, client.RawPatch(types.MergePatchType, []byte(body)))
}

// RemoveCosts takes the migration's costs off its targets' pods, a bounded
// number per reconcile, and returns how many are left.
func (s *Step) RemoveCosts(ctx context.Context) (int, error) {
	pm := s.Migration
	var changes []placement.CostChange
	err := s.State.With(ctx, func(snap *placement.Snapshot) error {
		for _, t := range s.Targets {
			if planning.RankedByOther(pm, s.Others, t.Ref) == "" {
				changes = append(changes, snap.ClearDeletionCosts(t.Workload)...)
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	removed, err := s.writeCosts(ctx, changes)
	metrics.CountDeletionCostWrites(pm.Namespace, pm.Name, "removed", removed)
	if err != nil {
		return len(changes) - removed, fmt.Errorf("remove the deletion costs of PlacementMigration %s/%s: %w", pm.Namespace, pm.Name, err)
	}
	return len(changes) - removed, nil
}

// CostsLeftBehind reports a removal the operator may not make (the opt-in
// role unbound since): holding the migration would keep it forever, and a
// cost left only ranks scale-downs, so it is left, with a Warning saying
// how to take it off.
func (s *Step) CostsLeftBehind(err error) (Event, bool) {
	if err == nil || !apierrors.IsForbidden(err) {
		return Event{}, false
	}
	return Event{Type: corev1.EventTypeWarning, Reason: pgv1.ReasonDeletionCostRefused, Message: fmt.Sprintf(
		"The deletion costs could not be removed (%v); they are left on the targets' pods. Remove them with: kubectl annotate pods -n %s -l <target selector> %s- %s-",
		err, s.Migration.Namespace, corev1.PodDeletionCost, placement.DeletionCostMark)}, true
}

// DropFinalizer lets the migration go once its costs are off. A conflict
// is returned as the API server's: the reconciler reads again.
func (s *Step) DropFinalizer(ctx context.Context) error {
	pm := s.Migration
	patch := client.MergeFromWithOptions(pm.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(pm, pgv1.DeletionCostFinalizer)
	if err := s.Client.Patch(ctx, pm, patch); err != nil {
		return fmt.Errorf("remove the deletion-cost finalizer of PlacementMigration %s/%s: %w", pm.Namespace, pm.Name, err)
	}
	return nil
}
