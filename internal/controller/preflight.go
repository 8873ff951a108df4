package controller

import (
	"context"
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/metrics"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// Before the hard stage, the disruptions its targets will meet are
// simulated on the placement its rollout would leave (the engine's
// simulation of that rollout, every pod of the new template where it
// placed it), so that seed 001's shape (replicas == nodes) is caught for
// drains as it is for rollouts, and so is every shape the arithmetic of
// replicas and nodes cannot see: pods pinned by volumes, zones lost,
// autoscalers beyond what fits.

// preflightDisruptions judges the group's hard stage against its
// PodDisruptionBudgets, its HorizontalPodAutoscalers, drains of the nodes
// it would run on and the loss of a zone; the first failure is the verdict.
func (s *scope) preflightDisruptions(ctx context.Context, group []*target, hard placement.Answer) (disruptionVerdict, error) {
	ok := disruptionVerdict{ok: true, reason: pgv1.ReasonDisruptionsTolerated}
	if s.pm.Spec.DisruptionCheck() == pgv1.DisruptionIgnore {
		return ok, nil
	}
	budgets, autoscalers, err := s.disruptionPolicies(ctx)
	if err != nil {
		return ok, err
	}
	metrics.CountDisruptionSimulation()
	v := ok
	err = s.r.State.With(func(snap *placement.Snapshot) error {
		for _, t := range group {
			got, err := s.preflightTarget(snap, t, hard, budgets, autoscalers)
			if err != nil || !got.ok {
				v = got
				return err
			}
		}
		return nil
	})
	return v, err
}

// preflightTarget simulates the disruptions of one target on the placement
// the hard stage's rollout leaves. A rollout that does not complete leaves
// none: the feasibility check has already judged it.
func (s *scope) preflightTarget(snap *placement.Snapshot, t *target, hard placement.Answer, budgets []policyv1.PodDisruptionBudget, autoscalers []autoscalingv2.HorizontalPodAutoscaler) (disruptionVerdict, error) {
	ok := disruptionVerdict{ok: true, reason: pgv1.ReasonDisruptionsTolerated}
	r, found := hard.Rollouts[t.String()]
	spec := hard.Templates[t.String()]
	if !found || spec == nil || !r.Completes {
		return ok, nil
	}
	w := *s.withOthers(t)
	w.Template = *w.Template.DeepCopy()
	w.Template.Spec = *spec
	v := ok
	err := snap.WithRolledOut(&w, r, func(rolled *placement.Workload, pods []*corev1.Pod) error {
		view := *t.Target.Target
		view.Workload, view.Pods = rolled, pods
		var err error
		v, err = s.disruptionsOf(snap, &target{&planning.Target{Target: &view, Ref: t.Ref, Rendered: t.Rendered}}, placement.StageHard, budgets, autoscalers)
		return err
	})
	if err != nil {
		return ok, fmt.Errorf("simulate the disruptions of %s after the Hard stage: %w", t, err)
	}
	if !v.ok {
		v.message = "once the Hard stage has rolled out, " + v.message
	}
	return v, nil
}

// applyPreflight turns the verdict into what the policy asks: a Block
// before the hard stage, or a Warning Event with the stage's outcome.
func (s *scope) applyPreflight(v disruptionVerdict) (outcome, bool) {
	if v.ok {
		return outcome{}, false
	}
	if s.pm.Spec.DisruptionCheck() == pgv1.DisruptionBlock {
		return outcome{blocked: true, reason: v.reason,
			message: v.message + "; the Soft stage stays applied (guards.disruptions: Block; set Warn to apply the Hard stage anyway)"}, true
	}
	return outcome{events: []note{{kind: corev1.EventTypeWarning, reason: v.reason,
		message: v.message + " (guards.disruptions: Warn: the Hard stage is applied)"}}}, false
}
