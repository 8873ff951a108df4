// Package health checks the health checks placement-guard ships for the
// tools that watch it: Argo CD's Lua health script, the kstatus verdict
// kubectl wait relies on, and the fleet gates of config/fleet. test/gates
// runs the same gates through the tools' own code.
package health

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// MigrationIn builds a migration as the operator leaves it in a phase: the
// kstatus conditions per docs/how-it-works.md.
func MigrationIn(phase pgv1.Phase, observed int64) *pgv1.PlacementMigration {
	pm := &pgv1.PlacementMigration{
		TypeMeta:   metav1.TypeMeta{APIVersion: pgv1.GroupVersion.String(), Kind: "PlacementMigration"},
		ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns", Generation: 2},
	}
	pm.Status.ObservedGeneration = observed
	pm.Status.Phase = phase
	cond := func(t string, s metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: t, Status: s, Reason: reason, Message: "what the operator says about " + string(phase), ObservedGeneration: observed}
	}
	switch phase {
	case pgv1.PhaseSucceeded, pgv1.PhasePlanned:
		pm.Status.Conditions = []metav1.Condition{cond(pgv1.ConditionReady, metav1.ConditionTrue, string(phase))}
	case pgv1.PhaseBlocked, pgv1.PhaseRolledBack, pgv1.PhaseFailed:
		pm.Status.Conditions = []metav1.Condition{cond(pgv1.ConditionReady, metav1.ConditionFalse, "RolloutDeadlock"), cond(pgv1.ConditionStalled, metav1.ConditionTrue, "RolloutDeadlock")}
	case pgv1.PhaseDegraded:
		pm.Status.Conditions = []metav1.Condition{cond(pgv1.ConditionReady, metav1.ConditionFalse, pgv1.ReasonConstraintUnsatisfied),
			cond(pgv1.ConditionStalled, metav1.ConditionTrue, pgv1.ReasonConstraintUnsatisfied)}
	default:
		pm.Status.Conditions = []metav1.Condition{cond(pgv1.ConditionReady, metav1.ConditionFalse, string(phase)), cond(pgv1.ConditionReconciling, metav1.ConditionTrue, string(phase))}
	}
	return pm
}
