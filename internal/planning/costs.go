package planning

import (
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// The deletion costs of spec.rebalance (modes DeletionCost and Evict):
// after success, the pods of a migration's Deployment targets are ranked
// so that a scale-down removes pods from the most crowded domains first.
// The operator asks Rankings before writing costs, and `kubectl placement
// plan` shows the same answer.

// CostsRole is the opt-in ClusterRole that lets the operator patch pods.
const CostsRole = "placement-guard-rebalance"

// Ranking is how one target's pods stand against the constraint, and
// which deletion costs keep its spread.
type Ranking struct {
	Target *Target
	// Plan is the engine's ranking; empty when the target's pods are not
	// interchangeable or another migration ranks them.
	Plan placement.CostPlan
	// Measured is the target's placement against its constraint.
	Measured placement.Measurement
	// HeldBy names the older migration that ranks the target's pods.
	HeldBy string
}

// Rankings asks the engine, for every target, how its pods stand and which
// costs keep its spread over the constraint's key.
func Rankings(snap *placement.Snapshot, pm *pgv1.PlacementMigration, others []pgv1.PlacementMigration, ts []*Target) ([]Ranking, error) {
	key := ConstraintFromSpec(pm.Spec.Constraint).TopologyKey()
	out := make([]Ranking, 0, len(ts))
	for _, t := range ts {
		r := Ranking{Target: t, HeldBy: RankedByOther(pm, others, t.Ref)}
		m, err := snap.Measure(t.Workload, t.Rendered)
		if err != nil {
			return nil, fmt.Errorf("measure %s: %w", t, err)
		}
		r.Measured = m
		if t.Interchangeable() && r.HeldBy == "" {
			r.Plan = snap.PlanDeletionCosts(t.Workload, key)
		}
		out = append(out, r)
	}
	return out, nil
}

// RankedByOther names the migration that ranks the target's pods when it
// is not pm: of the namespace's migrations that keep deletion costs on the
// target, the oldest does, so that two never rewrite each other's.
func RankedByOther(pm *pgv1.PlacementMigration, others []pgv1.PlacementMigration, ref pgv1.TargetRef) string {
	for i := range others {
		o := &others[i]
		if !o.Spec.KeepsDeletionCosts() || !o.DeletionTimestamp.IsZero() || Recorded(o, ref) == nil {
			continue
		}
		if olderThan(o, pm.CreationTimestamp, pm.Name) {
			return o.Name
		}
	}
	return ""
}

// CostChanges are the writes the rankings ask of this migration: none
// for a target another migration ranks, or whose pods carry a cost
// placement-guard did not write.
func CostChanges(rs []Ranking) []placement.CostChange {
	var changes []placement.CostChange
	for _, r := range rs {
		if r.HeldBy == "" && r.Plan.Foreign == "" {
			changes = append(changes, r.Plan.Changes...)
		}
	}
	return changes
}

// ForeignCost names a pod whose pod-deletion-cost placement-guard did not
// write, "" when none does.
func ForeignCost(rs []Ranking) string {
	for _, r := range rs {
		if r.Plan.Foreign != "" {
			return r.Plan.Foreign
		}
	}
	return ""
}

// DescribeRankings says how each target stands, for the Balanced
// condition and plan: left costs still to write, and a write refused.
func DescribeRankings(rs []Ranking, left int, refused error, namespace string) string {
	var parts []string
	for _, r := range rs {
		var b strings.Builder
		// The engine's summary names the target, its pods per domain and
		// the skew.
		b.WriteString(r.Measured.Summary)
		switch {
		case r.HeldBy != "":
			fmt.Fprintf(&b, "; its pods are ranked by PlacementMigration %s", r.HeldBy)
		case !r.Target.Interchangeable():
			b.WriteString("; a scale-down removes its highest ordinals, which no cost changes")
		case r.Plan.Foreign != "":
			fmt.Fprintf(&b, "; pod %s carries a pod-deletion-cost placement-guard did not write, so the ranking is left to its owner", r.Plan.Foreign)
		default:
			fmt.Fprintf(&b, "; deletion costs rank %d pod(s) from the most crowded domains", r.Plan.Ranked)
		}
		parts = append(parts, b.String())
	}
	msg := strings.Join(parts, ". ")
	switch {
	case refused != nil && apierrors.IsForbidden(refused):
		msg += fmt.Sprintf(". Writing a cost was refused (%v): bind the opt-in ClusterRole %s to the operator's ServiceAccount in namespace %s (docs/operations.md, \"Rebalance\")", refused, CostsRole, namespace)
	case refused != nil:
		msg += fmt.Sprintf(". Writing a cost was refused: %v", refused)
	case left > 0:
		msg += fmt.Sprintf(". %d cost(s) left to write", left)
	}
	return msg
}
