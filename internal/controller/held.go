package controller

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// The Hard stage's intent, held through the soak. The status write that
// records the Soft stage's verification also records the Hard stage's
// intent, held until the soak ends (Operation.NotBefore): the soak
// needs a status write of its own anyway, and the Hard stage's would
// otherwise be one more. While held, the intent writes nothing and holds
// no target; the soak's guards run as before. When the soak ends the
// migration decides again, as if nothing were held: a decision that
// records the same intent (the same targets, generations, entries and
// pods) makes the write at once, since the journal already holds it;
// any other outcome (a rollback, a stop, a changed workload) stands, and
// the held intent is dropped with it. Nothing is written to a workload
// that was not first recorded as it is written.

// holdNext records, with the Soft stage's verification, the Hard stage's
// intent for the group, held until the soak ends; o is the soak's
// outcome, told that the next stage is recorded when it is. The
// decision is asked as it would be at the soak's end (the pods' age);
// an intent it would not record now is not held, and the soak's end
// decides as before.
func (s *scope) holdNext(ctx context.Context, group []*target, until time.Time, o outcome) (outcome, error) {
	if s.pm.Spec.DryRun {
		return o, nil
	}
	sd, err := s.decideStage(ctx, group, pgv1.StageHard, until)
	if err != nil || sd.Kind != planning.Proceeds {
		return o, err
	}
	for _, t := range group {
		if _, refused, err := s.dryRun(ctx, t, t.Entry(pgv1.StageHard), pgv1.StageHard); refused || err != nil {
			return o, err
		}
	}
	s.record(sd.Decision)
	op := s.stageOperation(group, pgv1.StageHard)
	op.NotBefore = &metav1.Time{Time: until}
	s.pm.Status.Operation, s.pm.Status.Plan = op, nil
	setCondition(s.pm, s.now, pgv1.ConditionHardApplied, metav1.ConditionFalse, pgv1.ReasonIntentRecorded,
		fmt.Sprintf("The Hard stage is recorded and is written once the soak ends at %s, if the decision then is the same", until.UTC().Format(time.RFC3339)))
	o.message += "; the Hard stage is recorded, and written then"
	return o, nil
}

// continueHeld takes the next step of a migration whose intent is held:
// the soak's, with the intent kept while it lasts; at its end the
// decision made again, and the held write made at once when it records
// the same intent. A held write found made (a crash came between the
// write and its record) is verified as any other.
func (s *scope) continueHeld(ctx context.Context, op *pgv1.Operation) (outcome, error) {
	if s.heldWritten(op) {
		op.NotBefore = nil
		return s.continueOperation(ctx, op)
	}
	s.pm.Status.Operation, s.held = nil, op
	o, err := s.settled(ctx)
	if err != nil {
		return o, err
	}
	due := s.pm.Status.Operation
	if due == nil || due.Held() || o.reason != pgv1.ReasonIntentRecorded || !sameIntent(due, op) {
		return o, nil
	}
	w, err := s.write(ctx, due, unwritten(due))
	w.events = append(o.events, w.events...)
	return w, err
}

// keepHeld keeps the held intent through a soak that goes on, and says so
// in the soak's outcome o; it reports whether one is held.
func (s *scope) keepHeld(o *outcome) bool {
	if s.held == nil {
		return false
	}
	s.pm.Status.Operation = s.held
	o.message += "; the Hard stage is recorded, and written then"
	return true
}

// heldWritten reports whether a target of the held operation carries the
// entry it holds: the write was made, and its record lost to a crash.
func (s *scope) heldWritten(op *pgv1.Operation) bool {
	for _, ot := range op.Targets {
		t := s.target(ot.Kind, ot.Name)
		if t != nil && string(t.UID()) == ot.UID && placement.Carries(&t.Template().Spec, planning.EntryOf(ot.Entry)) {
			return true
		}
	}
	return false
}

// sameIntent reports whether operation due, decided now, records what the
// held one did: the write the journal already holds. When it was
// recorded, and when its pods were observed, differ by the soak.
func sameIntent(due, held *pgv1.Operation) bool {
	if due.Action != held.Action || due.From != held.From || due.Stage != held.Stage || due.Generation != held.Generation || len(due.Targets) != len(held.Targets) {
		return false
	}
	for i := range due.Targets {
		a, b := due.Targets[i].DeepCopy(), held.Targets[i].DeepCopy()
		for _, ot := range []*pgv1.OperationTarget{a, b} {
			if ot.PodsBefore != nil {
				ot.PodsBefore.ObservedAt = metav1.Time{}
			}
		}
		if !equality.Semantic.DeepEqual(a, b) {
			return false
		}
	}
	return true
}
