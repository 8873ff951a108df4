package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// Before the hard stage, the disruptions the hard constraint would not
// survive are checked from the capacity the engine found, so that seed
// 001's shape (replicas == nodes) is caught for drains as it is for
// rollouts: the placement a drain would be simulated on does not exist yet.

// preflightDisruptions judges the group against its PodDisruptionBudgets,
// its HorizontalPodAutoscalers and the qualifying nodes.
func (s *scope) preflightDisruptions(ctx context.Context, group []*target, capacity placement.Capacity) (disruptionVerdict, error) {
	ok := disruptionVerdict{ok: true, reason: pgv1.ReasonDisruptionsTolerated}
	if s.pm.Spec.DisruptionCheck() == pgv1.DisruptionIgnore {
		return ok, nil
	}
	budgets, autoscalers, err := s.disruptionPolicies(ctx)
	if err != nil {
		return ok, err
	}
	for _, t := range group {
		for _, b := range budgets {
			if blocks, why := budgetBlocksEveryEviction(&b, t); blocks {
				return disruptionVerdict{reason: pgv1.ReasonDrainBlockedByBudget, message: fmt.Sprintf(
					"PodDisruptionBudget %s %s, so a drain of a node %s runs on would never complete under the Hard stage; allow at least one disruption",
					b.Name, why, t)}, nil
			}
		}
		if !apartPerNode(t) {
			continue
		}
		for _, h := range autoscalers {
			ref := h.Spec.ScaleTargetRef
			if ref.Kind == string(t.Kind()) && ref.Name == t.Name() && int(h.Spec.MaxReplicas) > capacity.QualifyingNodes {
				return disruptionVerdict{reason: pgv1.ReasonScaleOutUnsatisfiable, message: fmt.Sprintf(
					"HorizontalPodAutoscaler %s may scale %s to %d replicas, but the Hard stage keeps one per node on %d qualifying nodes; add qualifying nodes or lower maxReplicas",
					h.Name, t, h.Spec.MaxReplicas, capacity.QualifyingNodes)}, nil
			}
		}
		if int(t.Workload.Replicas) >= capacity.QualifyingNodes {
			return disruptionVerdict{reason: pgv1.ReasonEvictedPodUnplaceable, message: fmt.Sprintf(
				"%s has %d replicas on %d qualifying nodes: under the Hard stage a drain of any of them (an upgrade, a consolidation) leaves the evicted pod nowhere to go; add a qualifying node (N+1)",
				t, t.Workload.Replicas, capacity.QualifyingNodes)}, nil
		}
	}
	return ok, nil
}

// apartPerNode reports a hard constraint that keeps the target's own pods
// one per node: a hostname anti-affinity whose term selects them.
func apartPerNode(t *target) bool {
	a := t.Rendered.AntiAffinity
	if a == nil || a.TopologyKey != corev1.LabelHostname {
		return false
	}
	term := a.AffinityTerm(t.Selector())
	sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
	return err == nil && sel.Matches(labels.Set(t.Template().Labels))
}

// applyPreflight turns the verdict into what the policy asks: a Block
// before the hard stage, or a Warning Event with the stage's outcome.
func (s *scope) applyPreflight(v disruptionVerdict) (outcome, bool) {
	if v.ok {
		return outcome{}, false
	}
	if s.pm.Spec.DisruptionCheck() == pgv1.DisruptionBlock {
		return outcome{phase: pgv1.PhaseBlocked, reason: v.reason,
			message: v.message + "; the Soft stage stays applied (guards.disruptions: Block; set Warn to apply the Hard stage anyway)"}, true
	}
	return outcome{events: []note{{kind: corev1.EventTypeWarning, reason: v.reason,
		message: v.message + " (guards.disruptions: Warn: the Hard stage is applied)"}}}, false
}
