package controller

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/clusterview"
	"github.com/placement-guard/placement-guard/internal/metrics"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// settleRecheck is how soon a workload between pods is looked at again
// for its DisruptionReady verdict.
const settleRecheck = 5 * time.Second

// checkDisruptions records in DisruptionReady whether the targets of a
// succeeded migration survive what the cluster will bring under the
// constraint: their autoscaler at its maximum, a PodDisruptionBudget that
// forbids every eviction, a drain of each node they run on.
func (s *scope) checkDisruptions(ctx context.Context) error {
	policies, err := s.disruptionPolicies(ctx)
	if err != nil {
		return err
	}
	if replicasOff, leaving := s.targetsUnsettled(ctx); replicasOff || leaving {
		// A pod deleted and not yet replaced makes every verdict about the
		// workload one pod short, and a pod of the last rollout still
		// leaving one pod long: judged then, a zone loss that strands a
		// pod looks survivable, a drain that has room looks stranded, and
		// pod churn would flip the condition. The last verdict on the
		// settled workload stands, and the workload is looked at again
		// soon: the event that settles it may have come before this read.
		// Pods only leaving are gone within their grace period: a success
		// waits for them (settleGrace) rather than say itself twice.
		s.settling = !replicasOff
		s.lookAgainIn(settleRecheck)
		return nil
	}
	key := s.disruptionInputs(policies)
	name := client.ObjectKeyFromObject(s.pm)
	v, known := s.r.disruptions.get(name, key)
	if !known {
		if v, err = s.simulateDisruptions(ctx, policies); err != nil {
			return err
		}
		s.r.disruptions.put(name, key, v)
	}
	status := metav1.ConditionTrue
	if !v.OK {
		status = metav1.ConditionFalse
	}
	if c := meta.FindStatusCondition(s.pm.Status.Conditions, pgv1.ConditionDisruptionReady); c != nil &&
		c.Status == status && c.Reason == v.Reason && c.ObservedGeneration == s.pm.Generation {
		// The same verdict: its words (the nodes and pods it names, which
		// pod churn renames) are kept, so that churn writes no status.
		return nil
	}
	setCondition(s.pm, s.now, pgv1.ConditionDisruptionReady, status, v.Reason, v.Message)
	return nil
}

// targetsSettled reports whether every target runs as many pods, bound
// and not being deleted, as it has replicas, and no pod of it is leaving.
func (s *scope) targetsSettled(ctx context.Context) bool {
	replicasOff, leaving := s.targetsUnsettled(ctx)
	return !replicasOff && !leaving
}

// targetsUnsettled reports whether a target runs another number of pods,
// bound and not being deleted, than it has replicas, and whether a pod of
// a target is leaving.
func (s *scope) targetsUnsettled(ctx context.Context) (replicasOff, leaving bool) {
	for _, t := range s.targets {
		running := int32(0)
		for _, p := range t.Pods {
			if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
				running++
			}
		}
		if running != t.Workload.Replicas {
			replicasOff = true
		}
	}
	// A pod being deleted still holds its node for the scheduler, and for
	// the simulation: judged then, a scale-out looks a node short, and the
	// verdict's inputs (the live pods) would not change when it goes.
	_ = s.r.State.With(ctx, func(snap *placement.Snapshot) error {
		for _, t := range s.targets {
			if sel, err := metav1.LabelSelectorAsSelector(t.Selector()); err == nil && snap.TerminatingSelected(t.Object().GetNamespace(), sel) > 0 {
				leaving = true
				return nil
			}
		}
		return nil
	})
	return replicasOff, leaving
}

// disruptionPolicies reads the namespace's PodDisruptionBudgets and
// HorizontalPodAutoscalers from the cache.
func (s *scope) disruptionPolicies(ctx context.Context) (planning.Policies, error) {
	return clusterview.Policies(ctx, s.r.Client, s.pm.Namespace)
}

// simulateDisruptions asks the engine whether the targets survive what
// the cluster will bring under the final stage.
func (s *scope) simulateDisruptions(ctx context.Context, p planning.Policies) (planning.DisruptionVerdict, error) {
	metrics.CountDisruptionSimulation()
	v := planning.Tolerated
	err := s.r.State.With(ctx, func(snap *placement.Snapshot) error {
		var err error
		v, err = planning.Disruptions(snap, s.intent(), planned(s.targets), p)
		return err
	})
	return v, err
}

// disruptionInputs fingerprints what the verdict is computed from: the
// spec, the nodes, the targets (generation, replicas, and each pod's
// resourceVersion) and the namespace's budgets and autoscalers. Pods of
// other workloads are left out on purpose: they would make pod churn
// anywhere re-run the simulation, and a drain's answer rarely turns on them.
func (s *scope) disruptionInputs(p planning.Policies) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d/%d", s.pm.UID, s.pm.Generation, s.r.State.NodeChanges())
	for _, t := range s.targets {
		fmt.Fprintf(h, "|%s/%d/%d", t, t.Generation(), t.Workload.Replicas)
		for _, p := range t.Pods {
			fmt.Fprintf(h, ",%s@%s", p.UID, p.ResourceVersion)
		}
	}
	for _, b := range p.Budgets {
		fmt.Fprintf(h, "|pdb/%s@%s", b.Name, b.ResourceVersion)
	}
	for _, a := range p.Autoscalers {
		fmt.Fprintf(h, "|hpa/%s@%s", a.Name, a.ResourceVersion)
	}
	return strconv.FormatUint(h.Sum64(), 16)
}
