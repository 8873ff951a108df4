package controller

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// retryRequested reports a value of the retry annotation the migration has
// not handled yet (Flux's requestedAt pattern).
func (s *scope) retryRequested() bool {
	v := s.pm.Annotations[pgv1.RetryAnnotation]
	return v != "" && v != s.pm.Status.LastHandledRetry
}

// retry restarts a RolledBack or Failed migration from its last verified
// stage: the stall is lifted, drift corrections and the targets' write
// budget start again. The value is recorded so that it triggers once; on
// a migration that is not stalled it only is recorded.
func (s *scope) retry() outcome {
	pm := s.pm
	pm.Status.LastHandledRetry = pm.Annotations[pgv1.RetryAnnotation]
	phase, stalled := terminal(pm)
	if !stalled {
		return outcome{reason: pgv1.ReasonRetried,
			message: fmt.Sprintf("Retry %q recorded; the migration was not stalled", pm.Status.LastHandledRetry)}
	}
	meta.RemoveStatusCondition(&pm.Status.Conditions, pgv1.ConditionStalled)
	pm.Status.Halt = nil
	pm.Status.DriftCorrections = 0
	meta.RemoveStatusCondition(&pm.Status.Conditions, pgv1.ConditionConstraintInSync)
	for _, t := range s.targets {
		s.r.Budget.Reset(s.key(t.Ref))
	}
	return outcome{reason: pgv1.ReasonRetried, message: fmt.Sprintf(
		"Retrying from the %s stage after %s (%s %q)", s.weakestVerified(), phase, pgv1.RetryAnnotation, pm.Status.LastHandledRetry)}
}
