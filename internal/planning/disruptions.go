package planning

import (
	"fmt"
	"slices"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/brief"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// A target under its constraint must survive what the cluster brings
// later, not only the rollout: a drain (with the PodDisruptionBudgets in
// force), a surge upgrade of its nodes, the loss of a zone, its
// autoscaler at its maximum. These are the engine's simulations, asked
// here for a migration's targets and worded as one verdict, the same for
// the operator (before the hard stage and after success) and for plan.

// maxDrainsSimulated bounds the nodes whose drain is simulated per target:
// past it the verdict speaks of the first nodes, by name.
const maxDrainsSimulated = 50

// Policies are the objects of a migration's namespace that decide how its
// targets are disrupted.
type Policies struct {
	Budgets     []policyv1.PodDisruptionBudget
	Autoscalers []autoscalingv2.HorizontalPodAutoscaler
}

// DisruptionVerdict is the first disruption a target does not survive, or
// the all-clear.
type DisruptionVerdict struct {
	OK              bool
	Reason, Message string
	// Fix is what lets the target survive it, in few words; the Message
	// ends with it.
	Fix string
	// Target is the target that does not survive it.
	Target pgv1.TargetRef
}

// failed is a disruption the target does not survive: why, and the fix
// that ends the message.
func failed(reason, why, fix string) DisruptionVerdict {
	return DisruptionVerdict{Reason: reason, Message: why + "; " + fix, Fix: fix}
}

// Tolerated is the all-clear with nothing said.
var Tolerated = DisruptionVerdict{OK: true, Reason: pgv1.ReasonDisruptionsTolerated}

// Disruptions judges the targets as they run now, under the constraint at
// stage final; the first failure is the verdict, and the all-clear names
// what the first targets survive.
func Disruptions(snap *placement.Snapshot, in Intent, ts []*Target, p Policies) (DisruptionVerdict, error) {
	var cleared []string
	for _, t := range ts {
		got, err := disruptionsOf(snap, in.Constraint, t, in.Final, p)
		if err != nil || !got.OK {
			got.Target = t.Ref
			return got, err
		}
		cleared = append(cleared, got.Message)
	}
	v := Tolerated
	v.Message = brief.FirstFew(cleared, 3, "; ")
	return v, nil
}

// DisruptionsAfterHard judges the targets on the placement the hard
// stage's rollout leaves (every pod of the new template where the engine's
// simulation of that rollout placed it), so that seed 001's shape
// (replicas == nodes) is caught for drains as it is for rollouts. Each
// workload carries the other migrations' constraints, as when the stage
// was asked. A rollout that does not complete leaves no placement: the
// feasibility check has judged it.
func DisruptionsAfterHard(snap *placement.Snapshot, in Intent, others []pgv1.PlacementMigration, ts []*Target, hard placement.Answer, p Policies) (DisruptionVerdict, error) {
	for _, t := range ts {
		got, err := disruptionsAfter(snap, in, others, t, hard, p)
		if err != nil || !got.OK {
			got.Target = t.Ref
			return got, err
		}
	}
	return Tolerated, nil
}

// afterHard begins the message of a disruption found on what the Hard
// stage's rollout leaves.
const afterHard = "once the Hard stage has rolled out, "

func disruptionsAfter(snap *placement.Snapshot, in Intent, others []pgv1.PlacementMigration, t *Target, hard placement.Answer, p Policies) (DisruptionVerdict, error) {
	key := t.Ref
	r, found := hard.Rollouts[key]
	spec := hard.Templates[key]
	if !found || spec == nil || !r.Completes {
		return Tolerated, nil
	}
	w := WithOthers(in, others, t).WithSpec(spec)
	v := Tolerated
	err := snap.WithRolledOut(w, r, func(rolled *placement.Workload, pods []*corev1.Pod) error {
		view := *t.Target
		view.Workload, view.Pods = rolled, pods
		var err error
		v, err = disruptionsOf(snap, in.Constraint, &Target{Target: &view, Ref: t.Ref, Rendered: t.Rendered}, pgv1.StageHard, p)
		return err
	})
	if err != nil {
		return Tolerated, fmt.Errorf("simulate the disruptions of %s after the Hard stage: %w", t, err)
	}
	if !v.OK {
		v.Message = afterHard + v.Message
	}
	return v, nil
}

// disruptionsOf simulates the disruptions of one target, the cheapest
// first.
func disruptionsOf(snap *placement.Snapshot, c placement.Constraint, t *Target, final pgv1.Stage, p Policies) (DisruptionVerdict, error) {
	maxReplicas, v, err := scaleOut(snap, t, final, p.Autoscalers)
	if err != nil || !v.OK {
		return v, err
	}
	nodes := nodesOf(t)
	for i := range p.Budgets {
		b := &p.Budgets[i]
		if blocks, why := budgetBlocksEveryEviction(b, t); blocks && len(nodes) > 0 {
			return failed(pgv1.ReasonDrainBlockedByBudget, fmt.Sprintf("PodDisruptionBudget %s %s, so a drain of a node %s runs on (%s) never completes",
				b.Name, why, t, brief.FirstFew(nodes, 3, "; ")), "allow at least one disruption (lower minAvailable, raise maxUnavailable), with a qualifying node for the evicted pod"), nil
		}
	}
	drained := nodes[:min(len(nodes), maxDrainsSimulated)]
	if v, err := drains(snap, t, final, drained); err != nil || !v.OK {
		return v, err
	}
	lost, err := zoneLoss(snap, c, t, final)
	if err != nil || !lost.OK {
		return lost, err
	}
	msg := fmt.Sprintf("%s: a drain of any node it runs on places the evicted pods elsewhere", t)
	if maxReplicas > t.Workload.Replicas {
		msg += fmt.Sprintf(", and %d replicas fit", maxReplicas)
	}
	if lost.Message != "" {
		msg += ", " + lost.Message
	}
	return DisruptionVerdict{OK: true, Reason: pgv1.ReasonDisruptionsTolerated, Message: msg}, nil
}

// scaleOut places the target at each of its autoscalers' maximum; it
// returns the largest replicas that fit.
func scaleOut(snap *placement.Snapshot, t *Target, final pgv1.Stage, autoscalers []autoscalingv2.HorizontalPodAutoscaler) (int32, DisruptionVerdict, error) {
	maxReplicas := t.Workload.Replicas
	for _, h := range autoscalers {
		ref := h.Spec.ScaleTargetRef
		if ref.Kind != string(t.Kind()) || ref.Name != t.Name() || h.Spec.MaxReplicas <= t.Workload.Replicas {
			continue
		}
		maxReplicas = max(maxReplicas, h.Spec.MaxReplicas)
		out, err := snap.SimulateScaleTo(t.Workload, h.Spec.MaxReplicas)
		if err != nil {
			return 0, DisruptionVerdict{}, err
		}
		if out.Placed < out.Replicas {
			return 0, failed(pgv1.ReasonScaleOutUnsatisfiable, fmt.Sprintf("HorizontalPodAutoscaler %s may scale %s to %d replicas, but under the %s constraint only %d fit on today's nodes (%s)",
				h.Name, t, h.Spec.MaxReplicas, final, out.Placed, out.Message), "add qualifying nodes or lower maxReplicas"+softerFix(final)), nil
		}
	}
	return maxReplicas, Tolerated, nil
}

// drains simulates a drain of each node in turn, then a surge upgrade of
// them all, which adds a node like each old one before draining it.
func drains(snap *placement.Snapshot, t *Target, final pgv1.Stage, drained []string) (DisruptionVerdict, error) {
	for _, node := range drained {
		d, err := snap.SimulateDrain(t.Workload, node)
		if err != nil {
			return DisruptionVerdict{}, err
		}
		if len(d.Unplaced) > 0 {
			up, err := snap.SimulateNodeUpgrade(t.Workload, drained)
			if err != nil {
				return DisruptionVerdict{}, err
			}
			return failed(pgv1.ReasonEvictedPodUnplaceable, fmt.Sprintf("a drain of node %s evicts %s of %s, which no other node admits under the %s constraint (%s); %s",
				node, brief.FirstFew(d.Unplaced, 3, "; "), t, final, d.Message, upgradeVerdict(up)), "add a qualifying node (N+1)"+softerFix(final)), nil
		}
	}
	up, err := snap.SimulateNodeUpgrade(t.Workload, drained)
	if err != nil {
		return DisruptionVerdict{}, err
	}
	if len(up.Unplaced) > 0 {
		return failed(pgv1.ReasonEvictedPodUnplaceable, fmt.Sprintf("a surge upgrade replacing %s in turn stops at node %s: %s of %s, evicted there after the pods moved before it, finds no node under the %s constraint (%s)",
			brief.FirstFew(drained, 3, "; "), up.StuckAt, brief.FirstFew(up.Unplaced, 3, "; "), t, final, up.Message), "add a qualifying node (N+1)"+softerFix(final)), nil
	}
	return Tolerated, nil
}

// upgradeVerdict says whether a surge upgrade, which adds a node like each
// old one before draining it, places what a drain in place strands.
func upgradeVerdict(up placement.NodeUpgrade) string {
	if len(up.Unplaced) == 0 {
		return "a surge upgrade (a new node joins before each old one is drained, in turn) would place it, a drain or consolidation in place would not"
	}
	return fmt.Sprintf("nor would a surge upgrade's new node for %s (%s)", up.StuckAt, up.Message)
}

// softerFix offers the Soft stage where the constraint is hard: a soft one
// never keeps a pod out.
func softerFix(final pgv1.Stage) string {
	if final == pgv1.StageHard {
		return ", or keep the Soft stage"
	}
	return ""
}

// nodesOf lists the nodes the target's pods run on, sorted.
func nodesOf(t *Target) []string {
	var nodes []string
	for _, p := range t.Pods {
		if p.Spec.NodeName != "" && !slices.Contains(nodes, p.Spec.NodeName) {
			nodes = append(nodes, p.Spec.NodeName)
		}
	}
	slices.Sort(nodes)
	return nodes
}

// budgetBlocksEveryEviction reports a PodDisruptionBudget that selects the
// target's pods and allows no eviction even when every one of them is
// healthy: minAvailable at least the replicas, or maxUnavailable 0. Its
// state of the moment (a pod not ready during a rollout) is not judged.
func budgetBlocksEveryEviction(b *policyv1.PodDisruptionBudget, t *Target) (bool, string) {
	sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(t.Template().Labels)) {
		return false, ""
	}
	replicas := int(t.Workload.Replicas)
	if b.Spec.MaxUnavailable != nil {
		n, err := intstr.GetScaledValueFromIntOrPercent(b.Spec.MaxUnavailable, replicas, true)
		if err == nil && n == 0 {
			return true, fmt.Sprintf("has maxUnavailable %s", b.Spec.MaxUnavailable.String())
		}
		return false, ""
	}
	if b.Spec.MinAvailable != nil {
		n, err := intstr.GetScaledValueFromIntOrPercent(b.Spec.MinAvailable, replicas, true)
		if err == nil && n >= replicas {
			return true, fmt.Sprintf("requires minAvailable %s of %d replicas", b.Spec.MinAvailable.String(), replicas)
		}
	}
	return false, ""
}
