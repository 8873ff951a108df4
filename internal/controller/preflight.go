package controller

import (
	corev1 "k8s.io/api/core/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// The hard stage's pre-flight (planning.DisruptionsAfterHard) is part of
// the one question asked before it; the guards say what its verdict does.

// applyPreflight turns the verdict into what the policy asks: a Block
// before the hard stage, or a Warning Event with the stage's outcome.
func (s *scope) applyPreflight(v planning.DisruptionVerdict) (outcome, bool) {
	if v.OK {
		return outcome{}, false
	}
	if s.pm.Spec.DisruptionCheck() == pgv1.DisruptionBlock {
		return outcome{blocked: true, reason: v.Reason,
			message: v.Message + "; the Soft stage stays applied (guards.disruptions: Block; set Warn to apply the Hard stage anyway)"}, true
	}
	return outcome{events: []note{{kind: corev1.EventTypeWarning, reason: v.Reason,
		message: v.Message + " (guards.disruptions: Warn: the Hard stage is applied)"}}}, false
}
