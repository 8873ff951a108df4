package planning

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// MoveWindow is the window of spec.rebalance.maxMovesPerHour, and how long
// a pod a move placed is not moved again.
const MoveWindow = time.Hour

// NextMove is the one question of mode Evict, asked by the operator before
// each move and by `kubectl placement plan`: which pod of the target to
// move, and where its replacement lands, with the migration's guards.
// A target whose pods are not interchangeable, or whose rolling update
// allows no unavailable pod, has no move, and the plan says why.
func NextMove(snap *placement.Snapshot, pm *pgv1.PlacementMigration, t *Target, now time.Time) (placement.MovePlan, error) {
	if !t.Interchangeable() {
		return placement.MovePlan{Even: true, Why: "a StatefulSet's pods keep their ordinal; none is moved"}, nil
	}
	if why := strategyForbidsMoves(t.Workload); why != "" {
		return placement.MovePlan{Why: why}, nil
	}
	return snap.PlanMove(t.Workload, t.Rendered, Movable(pm, now))
}

// strategyForbidsMoves says why the workload's rollout strategy allows no
// move: an eviction leaves a pod unavailable until its replacement is
// Ready, which a rolling update with maxUnavailable 0 does not allow.
func strategyForbidsMoves(w *placement.Workload) string {
	_, unavailable, err := placement.SurgeAndUnavailable(w.Strategy, w.Replicas)
	if err != nil || unavailable < 1 {
		return "its rolling update allows no unavailable pod (maxUnavailable 0), and a move leaves one unavailable until its replacement is Ready"
	}
	return ""
}

// Movable says why the migration keeps a pod where it is, "" when it may
// move: data on its node that the move would lose (unless
// spec.rebalance.moveLocalData), selected by guards.protectedPods, Ready
// for less than guards.minPodAge, or placed by a move within the window.
func Movable(pm *pgv1.PlacementMigration, now time.Time) func(*corev1.Pod) string {
	var protected labels.Selector
	if p := pm.Spec.Protected(); p != nil {
		sel, err := metav1.LabelSelectorAsSelector(p.AsMeta())
		if err != nil {
			// A selector that does not parse protects everything.
			sel = labels.Everything()
		}
		protected = sel
	}
	minAge := pm.Spec.MinPodAge()
	localData := pm.Spec.MovesLocalData()
	return func(pod *corev1.Pod) string {
		if why := placement.LocalData(pod); why != "" && !localData {
			return why + " (spec.rebalance.moveLocalData lets it move)"
		}
		if protected != nil && protected.Matches(labels.Set(pod.Labels)) {
			return "protected by guards.protectedPods"
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady && now.Sub(c.LastTransitionTime.Time) < minAge {
				return fmt.Sprintf("Ready for less than guards.minPodAge %s", minAge)
			}
		}
		if rb := pm.Status.Rebalance; rb != nil {
			for _, mv := range rb.Moves {
				if mv.Replacement == pod.Name && now.Sub(mv.At.Time) < MoveWindow {
					return "moved here within the hour"
				}
			}
		}
		return ""
	}
}
