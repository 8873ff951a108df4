package controller

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/brief"
)

// outcome is what one reconcile concluded, in words a person can act on,
// and the step's verdict on what it found; the phase and the kstatus
// conditions are derived from it and from what is recorded (derive).
type outcome struct {
	reason  string
	message string
	// after asks for another look once a timer runs out: a soak, a stage
	// timeout, a pod growing old enough. Everything else arrives as events.
	after time.Duration
	// events are told besides the phase change, such as a drift corrected.
	events []note
	// pendingByConstraint and pendingOther count the target pods Pending
	// after success, by cause, for the metric.
	pendingByConstraint, pendingOther int

	// blocked: nothing can be written until the cause is gone or a person
	// acts (a hazard, a claim, a refusal, a target missing or stuck).
	blocked bool
	// stalled: a person is needed, whatever the phase (a rollback that
	// cannot finish, a pod the controller will not replace).
	stalled bool
	// done: the migration is where its spec asks (the final stage
	// verified, or a dry run's plan recorded).
	done bool
	// degraded: done, but target pods stay Pending since.
	degraded bool
	// settling: a stage rolled out and its placement does not hold yet.
	settling bool
	// silent: nothing to record (a deletion without a finalizer).
	silent bool
	// capacity is what the migration's capacity request does in this
	// pass, as the decision says (provision).
	capacity capacityNeed
	// health is what summarize derived, for the Event.
	health health
}

// capacityNeed is what a step's decision asks of the migration's capacity
// request.
type capacityNeed int

const (
	// noCapacityNeed lets a standing request go: the decision found the
	// capacity, stopped, or was not about a stage.
	noCapacityNeed capacityNeed = iota
	// askForCapacity keeps the request sized to the engine's answer: the
	// decision waits for the capacity it lacks.
	askForCapacity
	// holdRequest leaves a standing request as it is: a fact held the
	// stage before the engine was asked (a target's pause, another
	// migration's write, the pod view), so the answer it was made on
	// stands until the next one.
	holdRequest
)

// note is one Event beyond the phase change.
type note struct {
	kind, reason, message string
}

// summarize sets the phase, observedGeneration and the kstatus conditions
// from the recorded milestones and the outcome, so that kubectl wait,
// Flux, Argo CD and Helm read the migration the way they read any
// resource:
//   - Ready is True only at Succeeded, or Planned for a dry run;
//   - Stalled is present, True, only when a person must act;
//   - Reconciling is present, True, whenever it is neither: while working,
//     waiting for capacity or stable pods, and while paused, so that
//     nothing waiting on the migration mistakes a pause for success.
//
// A condition's transition time changes only when its status does, so a
// migration whose outcome repeats writes nothing.
func (s *scope) summarize(o outcome) health {
	phase, h := s.derive(o)
	summarize(s.pm, o, phase, h, s.now)
	return h
}

// summarize records phase and h, derived from o, in the status.
func summarize(pm *pgv1.PlacementMigration, o outcome, phase pgv1.Phase, h health, now time.Time) {
	pm.Status.ObservedGeneration = pm.Generation
	pm.Status.Phase = phase
	set := func(t string, st metav1.ConditionStatus) {
		setCondition(pm, now, t, st, o.reason, o.message)
	}
	if !o.done && !o.degraded {
		// The verdict on disruptions is about the constraint in place.
		meta.RemoveStatusCondition(&pm.Status.Conditions, pgv1.ConditionDisruptionReady)
	}
	switch h {
	case ready:
		set(pgv1.ConditionReady, metav1.ConditionTrue)
		meta.RemoveStatusCondition(&pm.Status.Conditions, pgv1.ConditionReconciling)
		meta.RemoveStatusCondition(&pm.Status.Conditions, pgv1.ConditionStalled)
	case stalled:
		set(pgv1.ConditionReady, metav1.ConditionFalse)
		set(pgv1.ConditionStalled, metav1.ConditionTrue)
		meta.RemoveStatusCondition(&pm.Status.Conditions, pgv1.ConditionReconciling)
	default:
		set(pgv1.ConditionReady, metav1.ConditionFalse)
		set(pgv1.ConditionReconciling, metav1.ConditionTrue)
		meta.RemoveStatusCondition(&pm.Status.Conditions, pgv1.ConditionStalled)
	}
}

// setCondition sets a condition of the current generation, with its
// transition time from the reconciler's clock.
func setCondition(pm *pgv1.PlacementMigration, now time.Time, t string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&pm.Status.Conditions, metav1.Condition{
		Type: t, Status: s, Reason: reason, Message: brief.Truncate(msg, 4096),
		ObservedGeneration: pm.Generation, LastTransitionTime: metav1.NewTime(now),
	})
}

// terminal reports whether the migration halted at this generation (a
// stage rolled back, drift given up on, the write budget spent), and the
// phase it halted in. Only the halt milestone decides: a migration blocked
// before it wrote anything is not halted, whatever its reason.
func terminal(pm *pgv1.PlacementMigration) (pgv1.Phase, bool) {
	h := pm.Status.Halt
	if h == nil || h.Generation != pm.Generation {
		return "", false
	}
	if h.Outcome == pgv1.HaltFailed {
		return pgv1.PhaseFailed, true
	}
	return pgv1.PhaseRolledBack, true
}

// adoptLegacyHalt records the halt of a migration that halted under an
// operator from before the halt milestone, which recorded it only as a
// Stalled condition of a RolledBack or Failed migration: an upgrade must
// not turn a rolled-back migration into one that tries its stage again.
func adoptLegacyHalt(pm *pgv1.PlacementMigration) {
	if pm.Status.Halt != nil || (pm.Status.Phase != pgv1.PhaseRolledBack && pm.Status.Phase != pgv1.PhaseFailed) {
		return
	}
	c := meta.FindStatusCondition(pm.Status.Conditions, pgv1.ConditionStalled)
	if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != pm.Generation {
		return
	}
	outcome := pgv1.HaltRolledBack
	if pm.Status.Phase == pgv1.PhaseFailed {
		outcome = pgv1.HaltFailed
	}
	pm.Status.Halt = &pgv1.Halt{Outcome: outcome, Reason: c.Reason, Message: brief.Truncate(c.Message, 2048), Generation: pm.Generation, At: c.LastTransitionTime}
}

// hold repeats the outcome the halt records.
func hold(pm *pgv1.PlacementMigration) outcome {
	h := pm.Status.Halt
	return outcome{reason: h.Reason, message: h.Message}
}

// halt records that the migration stops at this generation with o, until
// the spec changes or a retry is asked for: RolledBack after a rollback
// rolled out, Failed after giving up on a write.
func (s *scope) halt(how pgv1.HaltOutcome, o outcome) outcome {
	s.pm.Status.Halt = &pgv1.Halt{Outcome: how, Reason: o.reason, Message: brief.Truncate(o.message, 2048), Generation: s.pm.Generation, At: metav1.NewTime(s.now)}
	return o
}
