package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/brief"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
	"github.com/placement-guard/placement-guard/internal/workloadpatch"
)

// The operation journal. Every write to a workload is recorded in status
// (what is written where, and what was there) by one reconcile, and made
// by the next, which reads the record back. The record is written with an
// optimistic lock, and the write is made only when the migration read is
// the API server's current one, so two replicas or a stale cache never both
// act. A write is server-side apply of the recorded entry, which is
// idempotent: a reconcile that finds the record after a crash makes the
// write again and changes nothing if it was made.

// newOperation starts an operation record.
func (s *scope) newOperation(action pgv1.OperationAction, from, to pgv1.Stage) *pgv1.Operation {
	return &pgv1.Operation{Action: action, From: from, Stage: to, StartedAt: metav1.NewTime(s.now), Generation: s.pm.Generation}
}

// operationTarget records one target of an operation: its identity and
// generation now, the entry to write and the entry it has now.
func (s *scope) operationTarget(t *target, entry, previous *corev1.PodSpec) pgv1.OperationTarget {
	return pgv1.OperationTarget{
		Kind: t.Ref.Kind, Name: t.Ref.Name, UID: string(t.UID()), GenerationBefore: t.Generation(),
		Entry: planning.SnapshotOf(entry), Previous: planning.SnapshotOf(previous), PodsBefore: recordOf(t.Pods, s.now),
	}
}

// recordIntent puts the operation in status: the reconcile's status patch
// is the journal. The write it names is made by the next reconcile.
func (s *scope) recordIntent(op *pgv1.Operation, o outcome) outcome {
	s.pm.Status.Operation = op
	s.pm.Status.Plan = nil
	return o
}

// continueOperation finishes the operation the journal records.
func (s *scope) continueOperation(ctx context.Context, op *pgv1.Operation) (outcome, error) {
	if op.Action != pgv1.ActionRevert {
		if o, abandoned := s.abandonIfGone(op); abandoned {
			return o, nil
		}
	}
	if pending := unwritten(op); len(pending) > 0 {
		return s.write(ctx, op, pending)
	}
	switch op.Action {
	case pgv1.ActionRollBack:
		return s.verifyRollback(ctx, op)
	case pgv1.ActionRevert:
		return s.completeRevert(ctx, op)
	}
	return s.verifyStage(ctx, op)
}

func unwritten(op *pgv1.Operation) []int {
	var out []int
	for i, ot := range op.Targets {
		if ot.AppliedGeneration == 0 {
			out = append(out, i)
		}
	}
	return out
}

// abandonIfGone drops an operation whose workload was deleted or
// re-created since it was recorded: what it was to write was for a
// workload that no longer exists. The migration starts over for the new
// one.
func (s *scope) abandonIfGone(op *pgv1.Operation) (outcome, bool) {
	for _, ot := range op.Targets {
		t := s.target(ot.Kind, ot.Name)
		if t != nil && string(t.UID()) == ot.UID {
			continue
		}
		s.pm.Status.Operation = nil
		s.forget(ot.Kind, ot.Name)
		msg := fmt.Sprintf("%s/%s was deleted or re-created while its %s operation was in flight; the migration starts over for it", ot.Kind, ot.Name, op.Action)
		if t == nil {
			return outcome{blocked: true, reason: pgv1.ReasonTargetNotFound, message: msg + "; " + missingMessage([]pgv1.TargetRef{ot.Ref()}, s.pm.Namespace)}, true
		}
		return outcome{reason: pgv1.ReasonProgressing, message: msg}, true
	}
	return outcome{}, false
}

// write makes the recorded writes not made yet.
func (s *scope) write(ctx context.Context, op *pgv1.Operation, pending []int) (outcome, error) {
	if !s.current {
		if err := s.r.ensureCurrent(ctx, s.pm); err != nil {
			return outcome{}, err
		}
	}
	log := logf.FromContext(ctx)
	var written []string
	for _, i := range pending {
		ot := &op.Targets[i]
		ref := ot.Ref()
		if op.Action == pgv1.ActionVerify {
			// Found applied: nothing to write, only to verify.
			ot.AppliedGeneration = max(ot.GenerationBefore, 1)
			continue
		}
		key := s.key(ref)
		// A rollback or a revert undoes what the migration wrote and is
		// always written, never held by the budget (a revert held during
		// a deletion would wait on nothing that wakes it); it is counted.
		if op.Action != pgv1.ActionRollBack && op.Action != pgv1.ActionRevert && !s.r.Budget.Allow(key, s.now) {
			return s.budgetExceeded(ref), nil
		}
		if op.Action == pgv1.ActionRevert {
			same, err := s.r.sameWorkload(ctx, s.pm.Namespace, ot)
			if err != nil {
				return outcome{}, err
			}
			if !same {
				// Deleted, or re-created under the same name: the new
				// workload carries nothing of ours and is left alone.
				ot.AppliedGeneration = 1
				continue
			}
		}
		ending := ""
		if op.Action == pgv1.ActionRevert {
			ending = fmt.Sprintf("PlacementMigration %s aborted or deleted, and reverted", s.pm.Name)
		}
		if generation, adopted, err := s.r.writeAdopted(ctx, s.pm, ot, planning.EntryOf(ot.Entry), s.manager, ending); adopted {
			if err != nil {
				if o, refused := s.refused(op, ref, err); refused {
					return o, nil
				}
				return outcome{}, err
			}
			log.Info("Moved the adopted constraint", "migration", klog.KObj(s.pm), "target", ref.String(), "action", op.Action,
				"stage", op.Stage, "generation", generation, "fieldManager", s.manager)
			ot.AppliedGeneration = generation
			s.r.Budget.Record(key, s.now)
			s.carriesWritten(op, ot)
			written = append(written, ref.String())
			continue
		} else if err != nil {
			return outcome{}, err
		}
		wt := workloadpatch.Target{Kind: ot.Kind, Namespace: s.pm.Namespace, Name: ot.Name, UID: types.UID(ot.UID)}
		ac, err := workloadpatch.ApplyConfiguration(wt, planning.EntryOf(ot.Entry))
		if err != nil {
			return outcome{}, err
		}
		log.Info("Writing the migration's entry", "migration", klog.KObj(s.pm), "target", ref.String(), "action", op.Action,
			"stage", op.Stage, "generation", ot.GenerationBefore, "fieldManager", s.manager)
		if err := s.r.Apply(ctx, ac, client.FieldOwner(s.manager)); err != nil {
			if op.Action == pgv1.ActionRevert && workloadpatch.IsPreconditionFailed(err) {
				// The uid precondition failed: the workload is gone or a
				// new one, and carries nothing of ours.
				ot.AppliedGeneration = 1
				continue
			}
			if o, refused := s.refused(op, ref, err); refused {
				return o, nil
			}
			return outcome{}, fmt.Errorf("write the %s stage into %s: %w", op.Stage, ref.String(), err)
		}
		ot.AppliedGeneration = max(workloadpatch.GenerationOf(ac), 1)
		s.r.Budget.Record(key, s.now)
		s.carriesWritten(op, ot)
		written = append(written, ref.String())
	}
	if op.Action == pgv1.ActionVerify {
		return s.continueOperation(ctx, op)
	}
	applied := note{kind: corev1.EventTypeNormal, reason: pgv1.ReasonStageApplied,
		message: fmt.Sprintf("Wrote the %s stage into %s (%s); waiting for the rollout", op.Stage, strings.Join(written, ", "), op.Action)}
	if op.Action == pgv1.ActionApplyStage || op.Action == pgv1.ActionReapply {
		// The pass that writes a stage goes on to watch its rollout, so
		// that the write and the rollout's first word share one status
		// write; the write is told as an Event.
		o, err := s.continueOperation(ctx, op)
		o.events = append([]note{applied}, o.events...)
		return o, err
	}
	return outcome{reason: applied.reason, message: applied.message}, nil
}

// carriesWritten records that a target now carries the entry just
// written into it, as the next look at its template finds: the write and
// the stage the status shows for it share one status write. A target a
// revert removes is forgotten instead.
func (s *scope) carriesWritten(op *pgv1.Operation, ot *pgv1.OperationTarget) {
	if op.Action == pgv1.ActionRevert || s.target(ot.Kind, ot.Name) == nil {
		return
	}
	s.status(ot.Ref()).Stage = placement.StageOfEntry(planning.EntryOf(ot.Entry))
}

// sameWorkload reports whether the workload an operation recorded still
// exists as the object it recorded (its uid), read from the API server: a
// workload deleted and re-created under the same name is another one.
func (r *PlacementMigrationReconciler) sameWorkload(ctx context.Context, namespace string, ot *pgv1.OperationTarget) (bool, error) {
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(ot.Kind.GroupVersionKind())
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ot.Name}, live)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read %s/%s before reverting it: %w", ot.Kind, ot.Name, err)
	}
	return ot.UID == "" || string(live.UID) == ot.UID, nil
}

// refused handles a write the API server refused for good: a field
// another manager owns, or a change it rejects. Nothing was written to
// that target; targets of the operation already written are rolled back.
func (s *scope) refused(op *pgv1.Operation, ref pgv1.TargetRef, err error) (outcome, bool) {
	o, ok := s.refusal(ref, op.Stage, err)
	if !ok {
		return outcome{}, false
	}
	if op.Action == pgv1.ActionRollBack || op.Action == pgv1.ActionRevert || len(unwritten(op)) == len(op.Targets) {
		s.pm.Status.Operation = nil
		return o, true
	}
	s.startRollback(op, o.reason, o.message)
	return o, true
}

// refusal turns an apply the API server refused for good into an outcome.
func (s *scope) refusal(ref pgv1.TargetRef, stage pgv1.Stage, err error) (outcome, bool) {
	if c, ok := workloadpatch.AsConflict(err); ok {
		for _, m := range c.Managers {
			if other, ours := workloadpatch.MigrationOf(m); ours {
				return outcome{blocked: true, reason: pgv1.ReasonTargetClaimed, message: fmt.Sprintf(
					"%s: the %s stage would change %s, written by PlacementMigration %s; one migration writes a field at a time. Delete one of the two migrations, or spread on another key",
					ref.String(), stage, strings.Join(c.Fields, ", "), other)}, true
			}
		}
		return outcome{blocked: true, reason: pgv1.ReasonFieldConflict, message: fmt.Sprintf(
			"%s: the %s stage would change %s, owned by field manager %s; placement-guard never takes fields over. Remove them where %s is defined, or let that manager apply the constraint",
			ref.String(), stage, strings.Join(c.Fields, ", "), quoteAll(c.Managers), ref.String())}, true
	}
	if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) {
		return outcome{blocked: true, reason: pgv1.ReasonApplyFailed, message: brief.Truncate(err.Error(), 2048)}, true
	}
	return outcome{}, false
}

// budgetExceeded stalls the migration rather than write a workload again.
func (s *scope) budgetExceeded(ref pgv1.TargetRef) outcome {
	msg := fmt.Sprintf("%s was written %d times within %s, the operator's write budget; the write recorded in status.operation is held. Find what keeps changing the workload, then set the %s annotation to retry",
		ref.String(), s.r.Budget.Max, s.r.Budget.Window, pgv1.RetryAnnotation)
	return s.halt(pgv1.HaltFailed, outcome{reason: pgv1.ReasonWriteBudgetExceeded, message: msg,
		events: []note{{kind: corev1.EventTypeWarning, reason: pgv1.ReasonWriteBudgetExceeded, message: msg}}})
}

// completeRevert ends a revert: the removed targets are forgotten.
func (s *scope) completeRevert(ctx context.Context, op *pgv1.Operation) (outcome, error) {
	for _, ot := range op.Targets {
		if s.pm.DeletionTimestamp.IsZero() {
			s.forget(ot.Kind, ot.Name)
		}
	}
	s.pm.Status.Operation = nil
	if !s.pm.DeletionTimestamp.IsZero() {
		return s.finalize(ctx)
	}
	return outcome{reason: pgv1.ReasonTargetRemoved,
		message: fmt.Sprintf("Removed the constraint from %d workload(s) that are no longer targets (onDelete: Revert)", len(op.Targets))}, nil
}

func applyingPhase(stage pgv1.Stage) pgv1.Phase {
	if stage == pgv1.StageHard {
		return pgv1.PhaseApplyingHard
	}
	return pgv1.PhaseApplyingSoft
}

func stageCondition(stage pgv1.Stage) string {
	if stage == pgv1.StageHard {
		return pgv1.ConditionHardApplied
	}
	return pgv1.ConditionSoftApplied
}

func quoteAll(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}
