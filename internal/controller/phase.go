package controller

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// The phase and the kstatus conditions are derived once per reconcile, in
// one place, from what is recorded: the halt, the operation journal, the
// stages verified per target and the milestone conditions, with the
// step's verdict on what it found (nothing can be written, the end is
// reached, a person is needed). No step names a phase and nothing decides
// from one: the phase is a summary for people and dashboards.

// health is what a migration asks of the people and tools watching it, in
// kstatus terms.
type health int

const (
	// progressing: at work or waiting for what will come (Reconciling).
	progressing health = iota
	// stalled: it cannot go on without a person (Stalled).
	stalled
	// ready: where it was asked to be (Ready).
	ready
)

// derive is the migration's phase and health once a step concluded o.
func (s *scope) derive(o outcome) (pgv1.Phase, health) {
	return derive(s.pm, o, s.weakestVerified())
}

// derive is the phase and health of migration pm, whose targets are all
// verified at stage verified at least, once a step concluded o.
func derive(pm *pgv1.PlacementMigration, o outcome, verified pgv1.Stage) (pgv1.Phase, health) {
	h := progressing
	if o.stalled {
		h = stalled
	}
	switch {
	case o.blocked:
		return pgv1.PhaseBlocked, stalled
	case pm.Spec.Paused && pm.DeletionTimestamp.IsZero():
		return pgv1.PhasePaused, progressing
	}
	if phase, halted := terminal(pm); halted {
		return phase, stalled
	}
	if op := pm.Status.Operation; op != nil && !op.Held() {
		return operationPhase(op, o), h
	}
	switch {
	case o.degraded:
		return pgv1.PhaseDegraded, stalled
	case o.done && pm.Spec.DryRun:
		return pgv1.PhasePlanned, ready
	case o.done:
		return pgv1.PhaseSucceeded, ready
	case drifting(pm):
		return applyingPhase(verified), h
	case meta.IsStatusConditionFalse(pm.Status.Conditions, pgv1.ConditionCapacityAvailable):
		return pgv1.PhaseWaitingForCapacity, h
	}
	switch verified {
	case pgv1.StageSoft:
		return pgv1.PhaseSoaking, h
	case pgv1.StageHard:
		return pgv1.PhaseVerifying, h
	}
	return pgv1.PhasePending, h
}

// operationPhase is the phase of a migration with an operation in flight.
func operationPhase(op *pgv1.Operation, o outcome) pgv1.Phase {
	switch op.Action {
	case pgv1.ActionRollBack:
		return pgv1.PhaseRollingBack
	case pgv1.ActionRevert:
		return pgv1.PhasePending
	case pgv1.ActionVerify:
		return pgv1.PhaseVerifying
	}
	if o.settling {
		return pgv1.PhaseVerifying
	}
	return applyingPhase(op.Stage)
}

// drifting reports an entry found removed and not yet written again.
func drifting(pm *pgv1.PlacementMigration) bool {
	c := meta.FindStatusCondition(pm.Status.Conditions, pgv1.ConditionConstraintInSync)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == pgv1.ReasonDrifted
}

// settled reports a migration that takes no step until something it
// depends on changes: halted, or every target verified at the final stage
// with nothing in flight, for the spec it has observed.
func settled(pm *pgv1.PlacementMigration) bool {
	if pm.Generation != pm.Status.ObservedGeneration || !pm.DeletionTimestamp.IsZero() || pm.Status.Operation != nil {
		return false
	}
	if _, halted := terminal(pm); halted {
		return true
	}
	if pm.Spec.DryRun || pm.Spec.Paused || len(pm.Status.Targets) == 0 {
		return false
	}
	for _, ts := range pm.Status.Targets {
		if ts.Verified == nil || ts.Verified.Stage != pm.Spec.Final() {
			return false
		}
	}
	return true
}
