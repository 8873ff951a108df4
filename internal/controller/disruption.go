package controller

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/metrics"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// maxDrainsSimulated bounds the nodes whose drain is simulated per target:
// past it the verdict speaks of the first nodes, by name.
const maxDrainsSimulated = 50

// disruptionVerdict is the first disruption a target does not survive, or
// the all-clear.
type disruptionVerdict struct {
	ok              bool
	reason, message string
}

// checkDisruptions records in DisruptionReady whether the targets of a
// succeeded migration survive what the cluster will bring under the
// constraint: their autoscaler at its maximum, a PodDisruptionBudget that
// forbids every eviction, a drain of each node they run on.
func (s *scope) checkDisruptions(ctx context.Context) error {
	budgets, autoscalers, err := s.disruptionPolicies(ctx)
	if err != nil {
		return err
	}
	if c := meta.FindStatusCondition(s.pm.Status.Conditions, pgv1.ConditionDisruptionReady); c != nil &&
		c.ObservedGeneration == s.pm.Generation && !s.targetsSettled() {
		// A pod deleted and not yet replaced makes every verdict about the
		// workload one pod short: judged then, a zone loss that strands a
		// pod looks survivable, and pod churn would flip the condition.
		// The last verdict on the settled workload stands.
		return nil
	}
	key := s.disruptionInputs(budgets, autoscalers)
	name := client.ObjectKeyFromObject(s.pm)
	v, known := s.r.disruptions.get(name, key)
	if !known {
		if v, err = s.simulateDisruptions(budgets, autoscalers); err != nil {
			return err
		}
		s.r.disruptions.put(name, key, v)
	}
	status := metav1.ConditionTrue
	if !v.ok {
		status = metav1.ConditionFalse
	}
	if c := meta.FindStatusCondition(s.pm.Status.Conditions, pgv1.ConditionDisruptionReady); c != nil &&
		c.Status == status && c.Reason == v.reason && c.ObservedGeneration == s.pm.Generation {
		// The same verdict: its words (the nodes and pods it names, which
		// pod churn renames) are kept, so that churn writes no status.
		return nil
	}
	setCondition(s.pm, s.now, pgv1.ConditionDisruptionReady, status, v.reason, v.message)
	return nil
}

// targetsSettled reports whether every target runs as many pods, bound
// and not being deleted, as it has replicas, and no pod of it is leaving.
func (s *scope) targetsSettled() bool {
	for _, t := range s.targets {
		running := int32(0)
		for _, p := range t.Pods {
			if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
				running++
			}
		}
		if running != t.Workload.Replicas {
			return false
		}
	}
	// A pod being deleted still holds its node for the scheduler, and for
	// the simulation: judged then, a scale-out looks a node short, and the
	// verdict's inputs (the live pods) would not change when it goes.
	leaving := 0
	_ = s.r.State.With(func(snap *placement.Snapshot) error {
		for _, t := range s.targets {
			if sel, err := metav1.LabelSelectorAsSelector(t.Selector()); err == nil {
				leaving += snap.TerminatingSelected(t.Object().GetNamespace(), sel)
			}
		}
		return nil
	})
	return leaving == 0
}

// disruptionPolicies reads the namespace's PodDisruptionBudgets and
// HorizontalPodAutoscalers from the cache.
func (s *scope) disruptionPolicies(ctx context.Context) ([]policyv1.PodDisruptionBudget, []autoscalingv2.HorizontalPodAutoscaler, error) {
	var budgets policyv1.PodDisruptionBudgetList
	if err := s.r.List(ctx, &budgets, client.InNamespace(s.pm.Namespace)); err != nil {
		return nil, nil, fmt.Errorf("list PodDisruptionBudgets in %s: %w", s.pm.Namespace, err)
	}
	var autoscalers autoscalingv2.HorizontalPodAutoscalerList
	if err := s.r.List(ctx, &autoscalers, client.InNamespace(s.pm.Namespace)); err != nil {
		return nil, nil, fmt.Errorf("list HorizontalPodAutoscalers in %s: %w", s.pm.Namespace, err)
	}
	return budgets.Items, autoscalers.Items, nil
}

// simulateDisruptions runs the simulations of every target; the first
// failure is the verdict.
func (s *scope) simulateDisruptions(budgets []policyv1.PodDisruptionBudget, autoscalers []autoscalingv2.HorizontalPodAutoscaler) (disruptionVerdict, error) {
	metrics.CountDisruptionSimulation()
	final := placement.Stage(s.pm.Spec.Final())
	v := disruptionVerdict{ok: true, reason: pgv1.ReasonDisruptionsTolerated}
	err := s.r.State.With(func(snap *placement.Snapshot) error {
		var cleared []string
		for _, t := range s.targets {
			got, err := s.disruptionsOf(snap, t, final, budgets, autoscalers)
			if err != nil || !got.ok {
				v = got
				return err
			}
			cleared = append(cleared, got.message)
		}
		v.message = firstFew(cleared, 3)
		return nil
	})
	return v, err
}

// disruptionInputs fingerprints what the verdict is computed from: the
// spec, the nodes, the targets (generation, replicas, and each pod's
// resourceVersion) and the namespace's budgets and autoscalers. Pods of
// other workloads are left out on purpose: they would make pod churn
// anywhere re-run the simulation, and a drain's answer rarely turns on them.
func (s *scope) disruptionInputs(budgets []policyv1.PodDisruptionBudget, autoscalers []autoscalingv2.HorizontalPodAutoscaler) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d/%d", s.pm.UID, s.pm.Generation, s.r.State.NodeChanges())
	for _, t := range s.targets {
		fmt.Fprintf(h, "|%s/%d/%d", t, t.Generation(), t.Workload.Replicas)
		for _, p := range t.Pods {
			fmt.Fprintf(h, ",%s@%s", p.UID, p.ResourceVersion)
		}
	}
	for _, b := range budgets {
		fmt.Fprintf(h, "|pdb/%s@%s", b.Name, b.ResourceVersion)
	}
	for _, a := range autoscalers {
		fmt.Fprintf(h, "|hpa/%s@%s", a.Name, a.ResourceVersion)
	}
	return strconv.FormatUint(h.Sum64(), 16)
}

// disruptionsOf simulates the disruptions of one target, the cheapest
// first.
func (s *scope) disruptionsOf(snap *placement.Snapshot, t *target, final placement.Stage, budgets []policyv1.PodDisruptionBudget, autoscalers []autoscalingv2.HorizontalPodAutoscaler) (disruptionVerdict, error) {
	maxReplicas := t.Workload.Replicas
	for _, h := range autoscalers {
		ref := h.Spec.ScaleTargetRef
		if ref.Kind != string(t.Kind()) || ref.Name != t.Name() || h.Spec.MaxReplicas <= t.Workload.Replicas {
			continue
		}
		maxReplicas = max(maxReplicas, h.Spec.MaxReplicas)
		out, err := snap.SimulateScaleTo(t.Workload, h.Spec.MaxReplicas)
		if err != nil {
			return disruptionVerdict{}, err
		}
		if out.Placed < out.Replicas {
			return disruptionVerdict{reason: pgv1.ReasonScaleOutUnsatisfiable, message: fmt.Sprintf(
				"HorizontalPodAutoscaler %s may scale %s to %d replicas, but under the %s constraint only %d fit on today's nodes (%s); add qualifying nodes or lower maxReplicas%s",
				h.Name, t, h.Spec.MaxReplicas, final, out.Placed, out.Message, softerFix(final))}, nil
		}
	}
	nodes := nodesOf(t)
	for _, b := range budgets {
		if blocks, why := budgetBlocksEveryEviction(&b, t); blocks && len(nodes) > 0 {
			return disruptionVerdict{reason: pgv1.ReasonDrainBlockedByBudget, message: fmt.Sprintf(
				"PodDisruptionBudget %s %s, so a drain of a node %s runs on (%s) never completes; allow at least one disruption (lower minAvailable, raise maxUnavailable), with a qualifying node for the evicted pod",
				b.Name, why, t, firstFew(nodes, 3))}, nil
		}
	}
	drained := nodes[:min(len(nodes), maxDrainsSimulated)]
	for _, node := range drained {
		d, err := snap.SimulateDrain(t.Workload, node)
		if err != nil {
			return disruptionVerdict{}, err
		}
		if len(d.Unplaced) > 0 {
			up, err := snap.SimulateNodeUpgrade(t.Workload, drained)
			if err != nil {
				return disruptionVerdict{}, err
			}
			return disruptionVerdict{reason: pgv1.ReasonEvictedPodUnplaceable, message: fmt.Sprintf(
				"a drain of node %s evicts %s of %s, which no other node admits under the %s constraint (%s); %s; add a qualifying node (N+1)%s",
				node, firstFew(d.Unplaced, 3), t, final, d.Message, upgradeVerdict(up), softerFix(final))}, nil
		}
	}
	up, err := snap.SimulateNodeUpgrade(t.Workload, drained)
	if err != nil {
		return disruptionVerdict{}, err
	}
	if len(up.Unplaced) > 0 {
		return disruptionVerdict{reason: pgv1.ReasonEvictedPodUnplaceable, message: fmt.Sprintf(
			"a surge upgrade replacing %s in turn stops at node %s: %s of %s, evicted there after the pods moved before it, finds no node under the %s constraint (%s); add a qualifying node (N+1)%s",
			firstFew(drained, 3), up.StuckAt, firstFew(up.Unplaced, 3), t, final, up.Message, softerFix(final))}, nil
	}
	lost, err := s.zoneLoss(snap, t, final)
	if err != nil || !lost.ok {
		return lost, err
	}
	msg := fmt.Sprintf("%s: a drain of any node it runs on places the evicted pods elsewhere", t)
	if maxReplicas > t.Workload.Replicas {
		msg += fmt.Sprintf(", and %d replicas fit", maxReplicas)
	}
	if lost.message != "" {
		msg += ", " + lost.message
	}
	return disruptionVerdict{ok: true, reason: pgv1.ReasonDisruptionsTolerated, message: msg}, nil
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
func softerFix(final placement.Stage) string {
	if final == placement.StageHard {
		return ", or keep the Soft stage"
	}
	return ""
}

// nodesOf lists the nodes the target's pods run on, sorted.
func nodesOf(t *target) []string {
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
func budgetBlocksEveryEviction(b *policyv1.PodDisruptionBudget, t *target) (bool, string) {
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
