package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/brief"
	"github.com/placement-guard/placement-guard/internal/controller/rebalance"
	"github.com/placement-guard/placement-guard/internal/metrics"
)

// startRollback replaces the operation in flight by its undoing: the
// targets it wrote get back the entry they had before it. Like any
// write, the rollback is recorded first and made by the next reconcile.
func (s *scope) startRollback(op *pgv1.Operation, reason, cause string) outcome {
	back := s.newOperation(pgv1.ActionRollBack, op.Stage, op.From)
	back.Reason, back.Message = reason, brief.Truncate(cause, 1024)
	for _, ot := range op.Targets {
		if ot.AppliedGeneration == 0 {
			continue
		}
		t := s.target(ot.Kind, ot.Name)
		back.Targets = append(back.Targets, pgv1.OperationTarget{
			Kind: ot.Kind, Name: ot.Name, UID: ot.UID, GenerationBefore: t.Generation(),
			Entry: ot.Previous, Previous: ot.Entry, PodsBefore: recordOf(t.Pods, s.now),
		})
	}
	metrics.CountRollback(reason)
	metrics.ObserveStage(string(op.Stage), "rolledBack", s.now.Sub(op.StartedAt.Time))
	setCondition(s.pm, s.now, stageCondition(op.Stage), metav1.ConditionFalse, pgv1.ReasonRolledBack, "Rolling back: "+cause)
	msg := fmt.Sprintf("Rolling the %s stage back to %s: %s", op.Stage, restoredName(back.Stage), cause)
	if len(back.Targets) == 0 {
		s.pm.Status.Operation = nil
		return s.rolledBack(back)
	}
	return s.recordIntent(back, outcome{reason: pgv1.ReasonRollingBack, message: msg,
		events: []note{{kind: corev1.EventTypeWarning, reason: reason, message: msg}}})
}

// rollbackSoak rolls back a soft stage whose soak found it hurting: the
// soaking targets get back what they had before it.
func (s *scope) rollbackSoak(group []*target, reason, cause string) outcome {
	op := s.newOperation(pgv1.ActionApplyStage, pgv1.StageNone, pgv1.StageSoft)
	for _, t := range group {
		ot := s.operationTarget(t, t.Entry(pgv1.StageSoft), nil)
		ot.AppliedGeneration = t.Generation()
		op.Targets = append(op.Targets, ot)
	}
	return s.startRollback(op, reason, cause)
}

// verifyRollback ends a rollback once the restored template rolled out: a
// rollback is complete only then. An OrderedReady StatefulSet does not
// replace a pod that never became Ready, so a pod stuck Pending with the
// rolled-back template is named, or evicted when the spec allows.
func (s *scope) verifyRollback(ctx context.Context, op *pgv1.Operation) (outcome, error) {
	if paused := s.pauseClock(op); len(paused) > 0 {
		return outcome{reason: pgv1.ReasonTargetPaused, message: fmt.Sprintf(
			"Rolling the %s stage back (%s): %s is paused (spec.paused), and the restored template rolls out once it resumes (kubectl rollout resume)",
			op.From, op.Message, brief.FirstFew(paused, 3, "; "))}, nil
	}
	var waiting, pending []string
	failed := false
	for _, ot := range op.Targets {
		t, progress, seen := s.rolloutOf(ot)
		if !seen {
			return outcome{reason: pgv1.ReasonRollingBack, message: notSeenYet(t, ot)}, nil
		}
		if progress.Done {
			continue
		}
		if progress.StuckPod != "" {
			return s.unstick(ctx, t, progress.StuckPod)
		}
		failed = failed || progress.Failed
		waiting = append(waiting, progress.Message)
		if why := pendingWhy(t.Pods); why != "" {
			pending = append(pending, fmt.Sprintf("%s: %s", t, why))
		}
	}
	if len(waiting) > 0 {
		return s.rollbackWaits(op, waiting, pending, failed), nil
	}
	at := metav1.NewTime(s.now)
	for _, ot := range op.Targets {
		t := s.target(ot.Kind, ot.Name)
		ts := s.status(t.Ref)
		ts.Applied = ot.Entry
		ts.Stage = op.Stage
		if op.Stage == pgv1.StageNone {
			ts.Verified = nil
		} else if ts.Verified == nil || ts.Verified.Stage != op.Stage {
			ts.Verified = &pgv1.StageMilestone{Stage: op.Stage, At: at}
		}
		ts.Stages = appendRecord(ts.Stages, pgv1.StageRecord{Stage: op.From, StartedAt: &op.StartedAt, CompletedAt: &at, Outcome: pgv1.OutcomeRolledBack,
			PodsBefore: summaryPtr(ot.PodsBefore), PodsAfter: ptrTo(summaryOf(t.Pods))})
	}
	s.pm.Status.Operation = nil
	s.pm.Status.Stage = s.weakestVerified()
	return s.rolledBack(op), nil
}

// rollbackWaits reports a rollback whose rollout has not completed. Past
// the stage timeout, or once the rollout has given up, it cannot finish by
// itself: the migration says so, Stalled, naming what holds the rollout
// (its Pending pods and the scheduler's word), and keeps watching, so that
// it completes the rollback once the cause is gone.
func (s *scope) rollbackWaits(op *pgv1.Operation, waiting, pending []string, failed bool) outcome {
	deadline := s.deadline(op)
	if !failed && s.now.Before(deadline) {
		return outcome{reason: pgv1.ReasonRollingBack, after: deadline.Sub(s.now),
			message: fmt.Sprintf("Rolling the %s stage back (%s): %s", op.From, op.Message, brief.FirstFew(waiting, 3, "; "))}
	}
	why := "its rollout gave up"
	if !failed {
		why = fmt.Sprintf("it has not rolled out within stageTimeout %s", s.pm.Spec.Timeout())
	}
	held := brief.FirstFew(waiting, 3, "; ")
	if len(pending) > 0 {
		held = brief.FirstFew(pending, 3, "; ")
	}
	return outcome{reason: pgv1.ReasonRollbackStalled, stalled: true, message: fmt.Sprintf(
		"The rollback of the %s stage (%s) cannot finish by itself: %s; %s. The restored template does not carry the %s stage, so that stage is not what holds it; fix the cause and the rollback completes",
		op.From, op.Message, why, held, op.From)}
}

// rolledBack is the end of a rollback: the migration stalls with its cause
// until a person fixes it and edits the spec or asks for a retry.
func (s *scope) rolledBack(op *pgv1.Operation) outcome {
	return s.halt(pgv1.HaltRolledBack, outcome{reason: op.Reason, message: fmt.Sprintf(
		"Rolled the %s stage back to %s: %s. Fix the cause, then set the %s annotation (or edit the spec) to try again",
		op.From, restoredName(op.Stage), op.Message, pgv1.RetryAnnotation)})
}

// unstick names the pod an OrderedReady StatefulSet waits for, or evicts
// it when guards.evictStuckPods allows.
func (s *scope) unstick(ctx context.Context, t *target, pod string) (outcome, error) {
	if !s.pm.Spec.EvictStuck() {
		return outcome{reason: pgv1.ReasonStuckPod, stalled: true, message: fmt.Sprintf(
			"%s: pod %s is not Ready and the StatefulSet controller does not replace it (kubernetes#67250), so the restored template cannot roll out: delete pod %s, or set spec.guards.evictStuckPods",
			t, pod, pod)}, nil
	}
	logf.FromContext(ctx).Info("Evicting a stuck pod", "migration", klog.KObj(s.pm), "target", t.String(), "pod", pod)
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: s.pm.Namespace, Name: pod}}
	if err := s.r.SubResource("eviction").Create(ctx, &corev1.Pod{ObjectMeta: ev.ObjectMeta}, ev); err != nil && !apierrors.IsNotFound(err) {
		if apierrors.IsForbidden(err) {
			// A person must act either way: grant the right, or delete
			// the pod. Tried again every 30 s.
			s.lookAgainIn(30 * time.Second)
			return outcome{reason: pgv1.ReasonStuckPod, stalled: true, message: fmt.Sprintf(
				"%s: pod %s is not Ready and the StatefulSet controller does not replace it (kubernetes#67250); guards.evictStuckPods is set but the eviction was refused (%v). %s, or delete pod %s",
				t, pod, err, rebalance.EvictRoleHint(s.pm.Namespace), pod)}, nil
		}
		return outcome{}, fmt.Errorf("evict pod %s/%s blocking the rollback of %s: %w", s.pm.Namespace, pod, t, err)
	}
	return outcome{reason: pgv1.ReasonStuckPod,
		message: fmt.Sprintf("%s: evicted pod %s, which the StatefulSet controller would not replace (guards.evictStuckPods)", t, pod)}, nil
}

func restoredName(st pgv1.Stage) string {
	if st == pgv1.StageSoft {
		return "the Soft stage"
	}
	return "what the targets carried before"
}
