package plugin

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// CostsReport is how spec.rebalance would rank the targets' pods for
// their controller's scale-downs, on the pods as they stand now: the
// operator asks the same question (planning.Rankings) once the migration
// has succeeded.
type CostsReport struct {
	// Summary is what the Balanced condition would say.
	Summary string `json:"summary"`
	// Writes are the pod-deletion-costs it would write (a nil cost
	// removes one).
	Writes []CostWrite `json:"writes,omitempty"`
}

// CostWrite is one pod's deletion cost.
type CostWrite struct {
	Pod  string `json:"pod"`
	Cost *int32 `json:"cost"`
}

// planCosts asks the operator's question of the deletion costs.
func planCosts(snap *placement.Snapshot, pm *pgv1.PlacementMigration, sit planning.Situation) (*CostsReport, error) {
	rankings, err := planning.Rankings(snap, pm, sit.Others, sit.Targets)
	if err != nil {
		return nil, err
	}
	changes := planning.CostChanges(rankings)
	r := &CostsReport{Summary: planning.DescribeRankings(rankings, 0, nil, pm.Namespace)}
	for _, c := range changes {
		r.Writes = append(r.Writes, CostWrite{Pod: c.Name, Cost: c.Cost})
	}
	return r, nil
}

// MoveReport is one move mode Evict would make: the operator asks the same
// question (planning.NextMove) before each of its moves.
type MoveReport struct {
	Target string `json:"target"`
	Pod    string `json:"pod"`
	From   string `json:"from"`
	To     string `json:"to"`
	Node   string `json:"node"`
}

// planMoves lists the moves spec.rebalance.mode Evict would make on the
// cluster, within one hour's budget, each placed on a copy of the cluster
// where the moves before it are made; the note says why the list ends.
// The first move is the operator's next; the ones after it assume each
// replacement lands where the engine places it, as the operator checks.
func planMoves(c *Cluster, pm *pgv1.PlacementMigration, found []*planning.Target, now time.Time) ([]MoveReport, []string, error) {
	snap, err := c.freshSnapshot()
	if err != nil {
		return nil, nil, err
	}
	var moves []MoveReport
	var notes []string
	budget := pm.Spec.MaxMovesPerHour()
	for _, t := range found {
		t = withOwnWorkload(t)
		for {
			if len(moves) == budget {
				return moves, append(notes, fmt.Sprintf("spec.rebalance.maxMovesPerHour %d reached", budget)), nil
			}
			plan, err := planning.NextMove(snap, pm, t, now)
			if err != nil {
				return nil, nil, err
			}
			if plan.Move == nil {
				notes = append(notes, fmt.Sprintf("%s: %s", t, plan.Why))
				break
			}
			mv := plan.Move
			moves = append(moves, MoveReport{Target: t.String(), Pod: mv.Pod, From: mv.From, To: mv.To, Node: mv.Node})
			if err := makeMove(snap, t, mv, len(moves)); err != nil {
				return nil, nil, err
			}
		}
	}
	return moves, notes, nil
}

// withOwnWorkload is a copy of t whose pod list the simulated moves may
// change without touching the stages' answers.
func withOwnWorkload(t *planning.Target) *planning.Target {
	tt := *t.Target
	w := *tt.Workload
	w.Pods = slices.Clone(w.Pods)
	tt.Workload = &w
	return &planning.Target{Target: &tt, Ref: t.Ref, Rendered: t.Rendered}
}

// makeMove replaces the moved pod, in the snapshot and the target's pod
// list, by its replacement on the node the engine placed it on.
func makeMove(snap *placement.Snapshot, t *planning.Target, mv *placement.PlannedMove, k int) error {
	pod, ok := snap.Pod(mv.UID)
	if !ok {
		return fmt.Errorf("move %s: the pod is not in the snapshot", mv.Pod)
	}
	moved := pod.DeepCopy()
	moved.Name = fmt.Sprintf("%s-moved-%d", mv.Pod, k)
	moved.UID = types.UID(fmt.Sprintf("%s-moved-%d", mv.UID, k))
	moved.Spec.NodeName = mv.Node
	snap.DeletePod(mv.UID)
	if err := snap.UpsertPod(moved); err != nil {
		return fmt.Errorf("move %s: %w", mv.Pod, err)
	}
	w := t.Workload
	w.Pods = slices.DeleteFunc(w.Pods, func(uid types.UID) bool { return uid == mv.UID })
	w.Pods = append(w.Pods, moved.UID)
	return nil
}
