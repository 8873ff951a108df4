package controller

import (
	"context"

	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/brief"
	"github.com/placement-guard/placement-guard/internal/metrics"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
	"github.com/placement-guard/placement-guard/internal/targets"
)

// verifyStage watches a written stage: it rolls the stage back on the first
// sign that it hurts, and completes it once every target has rolled out
// and, for the hard stage, the placement holds. Completion is judged before
// the deadline, so a stage found complete after an outage is not rolled
// back for the time the outage took.
func (s *scope) verifyStage(ctx context.Context, op *pgv1.Operation) (outcome, error) {
	stage := op.Stage
	if o, hurt, err := s.guardOperation(op); hurt || err != nil {
		return o, err
	}
	if paused := s.pauseClock(op); len(paused) > 0 {
		return outcome{reason: pgv1.ReasonTargetPaused, message: fmt.Sprintf(
			"%s is paused (spec.paused): the %s stage rolls out once it resumes (kubectl rollout resume); the stage timeout waits for it",
			brief.FirstFew(paused, 3, "; "), stage)}, nil
	}
	deadline := s.deadline(op)
	grace := s.r.UnschedulableGrace
	var waiting, notes []string
	next := deadline
	for _, ot := range op.Targets {
		t, progress, seen := s.rolloutOf(ot)
		if !seen {
			return outcome{reason: pgv1.ReasonRolloutInProgress, message: notSeenYet(t, ot)}, nil
		}
		if progress.Failed {
			return s.startRollback(op, pgv1.ReasonProgressDeadline, progress.Message), nil
		}
		why, waited, err := s.unschedulableByConstraint(ctx, t, planning.EntryOf(ot.Entry))
		if err != nil {
			return outcome{}, err
		}
		if why != "" {
			if waited >= grace {
				return s.startRollback(op, pgv1.ReasonPodsUnschedulable, fmt.Sprintf("%s: %s (for %s)", t, why, waited.Round(time.Second))), nil
			}
			next = minTime(next, s.now.Add(grace-waited))
		}
		if !progress.Done {
			waiting = append(waiting, progress.Message)
		} else if t.Partitioned() {
			notes = append(notes, progress.Message)
		}
	}
	if len(waiting) > 0 {
		if !s.now.Before(deadline) {
			cause := fmt.Sprintf("the %s stage did not complete within stageTimeout %s: %s", stage, s.pm.Spec.Timeout(), brief.FirstFew(waiting, 2, "; "))
			if why := s.pendingOf(op); why != "" {
				cause += "; " + why
			}
			return s.startRollback(op, pgv1.ReasonStageTimedOut, cause), nil
		}
		return outcome{reason: pgv1.ReasonRolloutInProgress, message: brief.FirstFew(waiting, 3, "; "), after: next.Sub(s.now)}, nil
	}
	summary, holds, err := s.measure(ctx, op)
	if err != nil {
		return outcome{}, err
	}
	if stage == pgv1.StageHard && !holds {
		if !s.now.Before(deadline) {
			return s.startRollback(op, pgv1.ReasonStageTimedOut, "the placement did not come to hold within stageTimeout: "+summary), nil
		}
		return outcome{settling: true, reason: pgv1.ReasonRolloutInProgress,
			message: "Rolled out, but the placement does not yet hold: " + summary, after: deadline.Sub(s.now)}, nil
	}
	if len(notes) > 0 {
		summary += "; " + strings.Join(notes, "; ")
	}
	return s.completeStage(op, summary), nil
}

// pendingOf names a Pending pod of the operation's targets and the
// scheduler's word on it.
func (s *scope) pendingOf(op *pgv1.Operation) string {
	for _, ot := range op.Targets {
		if t := s.target(ot.Kind, ot.Name); t != nil {
			if why := pendingWhy(t.Pods); why != "" {
				return fmt.Sprintf("%s: %s", t, why)
			}
		}
	}
	return ""
}

// completeStage records the stage verified on every target of the
// operation and ends the operation.
func (s *scope) completeStage(op *pgv1.Operation, summary string) outcome {
	stage := op.Stage
	at := metav1.NewTime(s.now)
	for _, ot := range op.Targets {
		t := s.target(ot.Kind, ot.Name)
		ts := s.status(t.Ref)
		ts.Verified = &pgv1.StageMilestone{Stage: op.Stage, At: at}
		ts.Applied = ot.Entry
		ts.Stage = op.Stage
		ts.Pods = recordOf(t.Pods, s.now)
		ts.Stages = appendRecord(ts.Stages, pgv1.StageRecord{Stage: op.Stage, StartedAt: &op.StartedAt, CompletedAt: &at, Outcome: pgv1.OutcomeVerified,
			PodsBefore: summaryPtr(ot.PodsBefore), PodsAfter: &ts.Pods.PodSetSummary})
	}
	s.pm.Status.Operation = nil
	s.pm.Status.Stage = s.weakestVerified()
	metrics.ObserveStage(string(stage), "verified", s.now.Sub(op.StartedAt.Time))
	msg := fmt.Sprintf("The %s stage rolled out and was verified: %s", stage, summary)
	setCondition(s.pm, s.now, stageCondition(stage), metav1.ConditionTrue, pgv1.ReasonStageVerified, msg)
	if op.Action == pgv1.ActionReapply {
		setCondition(s.pm, s.now, pgv1.ConditionConstraintInSync, metav1.ConditionTrue, pgv1.ReasonInSync, fmt.Sprintf("Every target carries the %s constraint again", stage))
	}
	return outcome{reason: pgv1.ReasonStageVerified, message: msg}
}

// measure judges the targets' actual placement against the entries the
// operation wrote, whatever the spec says now.
func (s *scope) measure(ctx context.Context, op *pgv1.Operation) (string, bool, error) {
	var summaries []string
	holds := true
	err := s.r.State.With(ctx, func(snap *placement.Snapshot) error {
		for _, ot := range op.Targets {
			t := s.target(ot.Kind, ot.Name)
			got, err := snap.Measure(t.Workload, placement.ConstraintOf(planning.EntryOf(ot.Entry)))
			if err != nil {
				return err
			}
			if !got.Holds && t.Partitioned() {
				got.Summary += "; the ordinals below the partition keep their template and are not moved"
				got.Holds = true
			}
			holds = holds && got.Holds
			summaries = append(summaries, got.Summary)
		}
		return nil
	})
	return strings.Join(summaries, "; "), holds, err
}

// guardOperation rolls the operation back when a protected pod was
// recreated or a target pod restarted more than guards.maxRestarts since
// the operation was recorded.
func (s *scope) guardOperation(op *pgv1.Operation) (outcome, bool, error) {
	if changed, err := s.protectedChange(); err != nil || changed != "" {
		if err != nil {
			return outcome{}, false, err
		}
		return s.startRollback(op, pgv1.ReasonProtectedPodChanged, "protected pod "+changed), true, nil
	}
	for _, ot := range op.Targets {
		t := s.target(ot.Kind, ot.Name)
		if why := s.restartedBeyondLimit(t, ot.PodsBefore); why != "" {
			return s.startRollback(op, pgv1.ReasonPodsRestarted, why), true, nil
		}
	}
	return outcome{}, false, nil
}

// restartedBeyondLimit says which pod of t added more restarts than
// guards.maxRestarts since the record.
func (s *scope) restartedBeyondLimit(t *target, rec *pgv1.PodSetRecord) string {
	limit := s.pm.Spec.MaxRestarts()
	for _, p := range t.Pods {
		if added := restartsSince(rec, p); added > limit {
			return fmt.Sprintf("%s: pod %s restarted %d time(s) since %s, more than guards.maxRestarts %d", t, p.Name, added, rec.ObservedAt.UTC().Format(time.RFC3339), limit)
		}
	}
	return ""
}

// appendRecord keeps the newest stage records within the API's bound.
func appendRecord(records []pgv1.StageRecord, r pgv1.StageRecord) []pgv1.StageRecord {
	records = append(records, r)
	if len(records) > 4 {
		records = records[len(records)-4:]
	}
	return records
}

func summaryPtr(rec *pgv1.PodSetRecord) *pgv1.PodSetSummary {
	if rec == nil {
		return nil
	}
	return &rec.PodSetSummary
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func ptrTo[T any](v T) *T { return &v }

// rolloutOf is an operation's target and the progress of the rollout the
// operation's write started; seen is false while the cache has not seen
// that write yet (its event brings the next look).
func (s *scope) rolloutOf(ot pgv1.OperationTarget) (*target, targets.Progress, bool) {
	t := s.target(ot.Kind, ot.Name)
	if t.Generation() < ot.AppliedGeneration {
		return t, targets.Progress{}, false
	}
	return t, t.Progress(ot.AppliedGeneration), true
}

// notSeenYet says what a rollout not seen yet waits for.
func notSeenYet(t *target, ot pgv1.OperationTarget) string {
	return fmt.Sprintf("%s: waiting to observe generation %d", t, ot.AppliedGeneration)
}
