package controller

import (
	"context"
	"fmt"
	"strings"
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
)

// After success, a migration with spec.rebalance.mode DeletionCost keeps
// the pods of its Deployment targets ranked so that a scale-down removes
// pods from the most crowded domains first: the ReplicaSet controller's
// own choice knows nothing of zones. The engine says which costs keep the
// spread (placement.PlanDeletionCosts); this file writes them, a bounded
// number per reconcile, records the Balanced condition, and takes the
// costs off again when the mode is Off or the migration is deleted. The
// finalizer is added before the first cost is written and removed after
// the last is taken off, so no crash leaves costs nobody removes.

// maxCostWrites bounds the pod writes of one reconcile; the next reconcile
// makes the rest.
const maxCostWrites = 20

// costsRole is the opt-in ClusterRole that lets the operator patch pods.
const costsRole = "placement-guard-rebalance"

// targetRanking is what one target's pods need and how they stand.
type targetRanking struct {
	target *target
	plan   placement.CostPlan
	// measured is the target's placement against its constraint.
	measured placement.Measurement
	// heldBy names the older migration that ranks the target's pods.
	heldBy string
}

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
	rankings, err := s.rankings()
	if err != nil {
		return o, err
	}
	var changes []placement.CostChange
	for _, r := range rankings {
		if r.heldBy == "" && r.plan.Foreign == "" {
			changes = append(changes, r.plan.Changes...)
		}
	}
	written, refused := s.writeCosts(ctx, changes)
	metrics.CountDeletionCostWrites(s.pm.Namespace, s.pm.Name, "written", written)
	for _, r := range rankings {
		metrics.RecordSkew(s.pm.Namespace, s.pm.Name, r.target.String(), r.measured.Skew)
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
	case foreign(rankings) != "":
		status, reason = metav1.ConditionFalse, pgv1.ReasonForeignDeletionCost
	case written < len(changes):
		reason = pgv1.ReasonDeletionCostsWriting
	}
	msg := describeRankings(rankings, len(changes)-written, refused, s.pm.Namespace)
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

// rankings asks the engine, for every target, how its pods stand and which
// costs keep its spread.
func (s *scope) rankings() ([]targetRanking, error) {
	key := s.constraint.TopologyKey()
	out := make([]targetRanking, 0, len(s.targets))
	err := s.r.State.With(func(snap *placement.Snapshot) error {
		for _, t := range s.targets {
			r := targetRanking{target: t, heldBy: s.rankedByOther(t)}
			m, err := snap.Measure(t.Workload, t.Rendered)
			if err != nil {
				return err
			}
			r.measured = m
			if t.Interchangeable() && r.heldBy == "" {
				r.plan = snap.PlanDeletionCosts(t.Workload, key)
			}
			out = append(out, r)
		}
		return nil
	})
	return out, err
}

// rankedByOther names the migration that ranks the target's pods when it
// is not this one: of the namespace's migrations that keep deletion costs
// on the target, the oldest does, so that two never rewrite each other's.
func (s *scope) rankedByOther(t *target) string {
	for i := range s.others {
		o := &s.others[i]
		if !o.Spec.KeepsDeletionCosts() || !o.DeletionTimestamp.IsZero() || !recordsTarget(o, t) {
			continue
		}
		if older(o, s.pm) {
			return o.Name
		}
	}
	return ""
}

func recordsTarget(pm *pgv1.PlacementMigration, t *target) bool {
	for _, ts := range pm.Status.Targets {
		if ts.Kind == t.Ref.Kind && ts.Name == t.Ref.Name {
			return true
		}
	}
	return false
}

// older reports whether a was created before b, by name for a tie.
func older(a, b *pgv1.PlacementMigration) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
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
			if s.rankedByOther(t) == "" {
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

func foreign(rankings []targetRanking) string {
	for _, r := range rankings {
		if r.plan.Foreign != "" {
			return r.plan.Foreign
		}
	}
	return ""
}

// describeRankings says how each target stands, for the condition.
func describeRankings(rankings []targetRanking, left int, refused error, namespace string) string {
	var parts []string
	for _, r := range rankings {
		var b strings.Builder
		// The engine's summary names the target, its pods per domain and
		// the skew.
		b.WriteString(r.measured.Summary)
		switch {
		case r.heldBy != "":
			fmt.Fprintf(&b, "; its pods are ranked by PlacementMigration %s", r.heldBy)
		case !r.target.Interchangeable():
			b.WriteString("; a scale-down removes its highest ordinals, which no cost changes")
		case r.plan.Foreign != "":
			fmt.Fprintf(&b, "; pod %s carries a pod-deletion-cost placement-guard did not write, so the ranking is left to its owner", r.plan.Foreign)
		default:
			fmt.Fprintf(&b, "; deletion costs rank %d pod(s) from the most crowded domains", r.plan.Ranked)
		}
		parts = append(parts, b.String())
	}
	msg := strings.Join(parts, ". ")
	switch {
	case refused != nil && apierrors.IsForbidden(refused):
		msg += fmt.Sprintf(". Writing a cost was refused (%v): bind the opt-in ClusterRole %s to the operator's ServiceAccount in namespace %s (docs/operations.md, \"Rebalance\")", refused, costsRole, namespace)
	case refused != nil:
		msg += fmt.Sprintf(". Writing a cost was refused: %v", refused)
	case left > 0:
		msg += fmt.Sprintf(". %d cost(s) left to write", left)
	}
	return msg
}
