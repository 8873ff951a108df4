package controller

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// soaked reports whether every target of the group has held its soft stage
// for soakDuration.
func (s *scope) soaked(group []*target) bool {
	return !s.now.Before(s.soakEnd(group))
}

// soakEnd is when the last of the group's soft stages has soaked.
func (s *scope) soakEnd(group []*target) time.Time {
	var end time.Time
	for _, t := range group {
		if v := s.status(t.Ref).Verified; v != nil {
			if at := v.At.Add(s.pm.Spec.Soak()); at.After(end) {
				end = at
			}
		}
	}
	return end
}

// soakOrSucceed holds a verified soft stage for soakDuration, watching the
// guards the whole time, and ends the migration once every target is
// verified at the final stage (and, for a soft final stage, soaked).
func (s *scope) soakOrSucceed(ctx context.Context) (outcome, error) {
	final := s.pm.Spec.Final()
	var soaking []*target
	for _, t := range s.targets {
		if s.verified(t) == pgv1.StageSoft {
			soaking = append(soaking, t)
		}
	}
	if len(soaking) > 0 {
		if changed, err := s.protectedChange(); err != nil || changed != "" {
			if err != nil {
				return outcome{}, err
			}
			return s.rollbackSoak(soaking, pgv1.ReasonProtectedPodChanged, "protected pod "+changed), nil
		}
		for _, t := range soaking {
			if why := s.restartedBeyondLimit(t, s.status(t.Ref).Pods); why != "" {
				return s.rollbackSoak(soaking, pgv1.ReasonPodsRestarted, why), nil
			}
		}
		if stop := s.outsideCause(soaking); stop != nil {
			return stopOutcome(*stop), nil
		}
		if until := s.soakEnd(soaking); s.now.Before(until) {
			next := "the Hard stage"
			if final == pgv1.StageSoft {
				next = "success"
			}
			o := outcome{reason: pgv1.ReasonSoaking,
				message: fmt.Sprintf("The Soft stage holds; soaking until %s before %s", until.UTC().Format(time.RFC3339), next),
				after:   until.Sub(s.now)}
			if final == pgv1.StageHard && !s.keepHeld(&o) && s.justVerified {
				return s.holdNext(ctx, soaking, until, o)
			}
			return o, nil
		}
	}
	o := s.succeed(final)
	if err := s.checkDisruptions(ctx); err != nil {
		return outcome{}, err
	}
	d, degraded, err := s.pendingAfterSuccess(ctx, final)
	if err != nil || degraded {
		return d, err
	}
	o.after = d.after
	return o, nil
}

// succeed records the end of the migration.
func (s *scope) succeed(final pgv1.Stage) outcome {
	s.pm.Status.Plan = nil
	s.pm.Status.Stage = s.weakestVerified()
	setCondition(s.pm, s.now, pgv1.ConditionConstraintInSync, metav1.ConditionTrue, pgv1.ReasonInSync, fmt.Sprintf("Every target carries the %s constraint", final))
	return outcome{done: true, reason: pgv1.ReasonSucceeded,
		message: fmt.Sprintf("The %s stage is applied and verified on %s", final, targetNames(s.targets))}
}
