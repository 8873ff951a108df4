package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
	"github.com/placement-guard/placement-guard/internal/workloadpatch"
)

// checkFeasible stops at the first blocking hazard of any stage's answer.
func (s *scope) checkFeasible(ctx context.Context, v planning.Verdict) (outcome, bool, error) {
	s.pm.Status.Hazards = v.Hazards()
	if b := v.FirstBlocking(); b != nil {
		msg := b.Message
		if b.Type == placement.HazardAffinityClobber {
			owners, err := s.placementOwners(ctx, b.Workload)
			if err != nil {
				return outcome{}, false, err
			}
			if owners != "" {
				msg += "; those fields are written by field manager " + owners
			}
		}
		setCondition(s.pm, s.now, pgv1.ConditionFeasible, metav1.ConditionFalse, b.Type, msg)
		if r := s.request; r != nil && r.Shortfall > 0 {
			// More nodes let the rollout through, and the spec asks the
			// autoscaler for them: wait for them, as for capacity.
			msg = fmt.Sprintf("%s; %s", r.Why, msg)
			setCondition(s.pm, s.now, pgv1.ConditionCapacityAvailable, metav1.ConditionFalse, pgv1.ReasonInsufficientCapacity, msg)
			return outcome{reason: pgv1.ReasonWaitingForCapacity, message: truncate(msg, 2048)}, true, nil
		}
		return outcome{blocked: true, reason: b.Type, message: truncate(msg, 2048)}, true, nil
	}
	names := make([]string, len(v.Stages))
	for i, st := range v.Stages {
		names[i] = string(st)
	}
	setCondition(s.pm, s.now, pgv1.ConditionFeasible, metav1.ConditionTrue, pgv1.ReasonFeasible,
		fmt.Sprintf("The simulated rollout of the %s stage completes on every target", strings.Join(names, " and ")))
	return outcome{}, false, nil
}

// placementOwners names the field managers, other than this migration's,
// that own anti-affinity or spread fields of the target ref ("Kind/name"),
// from its managed fields, which only the API server has.
func (s *scope) placementOwners(ctx context.Context, ref string) (string, error) {
	kind, name, _ := strings.Cut(ref, "/")
	t := s.target(pgv1.WorkloadKind(kind), name)
	if t == nil {
		return "", nil
	}
	live := t.Object().DeepCopyObject().(client.Object)
	if err := s.r.APIReader.Get(ctx, client.ObjectKeyFromObject(live), live); err != nil {
		return "", fmt.Errorf("read managed fields of %s: %w", ref, err)
	}
	var owners []string
	for _, mf := range live.GetManagedFields() {
		if mf.Manager != s.manager && mf.Subresource == "" && workloadpatch.OwnsPlacementFields(mf) {
			owners = append(owners, mf.Manager)
		}
	}
	return quoteAll(owners), nil
}

// plan dry-runs the stage on every target of the group and lists, from
// the verdict, the pods it recreates and where a hard spread leaves them.
func (s *scope) plan(ctx context.Context, group []*target, v planning.Verdict) ([]pgv1.TargetPlan, map[string][]string, outcome, bool, error) {
	for _, t := range group {
		if o, refused, err := s.dryRun(ctx, t, t.entry(v.Stage), v.Stage); refused || err != nil {
			return nil, nil, o, refused, err
		}
	}
	plan, recreated := v.Plan(planned(group))
	return plan, recreated, outcome{}, false, nil
}

// dryRun applies entry to the target as a server-side dry run: a write
// the API server would refuse for good (a field another manager owns, a
// change it rejects) is an outcome, and nothing is written.
func (s *scope) dryRun(ctx context.Context, t *target, entry *corev1.PodSpec, stage placement.Stage) (outcome, bool, error) {
	if adoptedRecord(t.Object(), s.pm.Name, entry) != nil {
		// Moved in place by a patch (adopted.go), which no field manager
		// refuses.
		return outcome{}, false, nil
	}
	ac, err := workloadpatch.ApplyConfiguration(t.patchTarget(), entry)
	if err != nil {
		return outcome{}, false, err
	}
	if err := s.r.Apply(ctx, ac, client.FieldOwner(s.manager), client.DryRunAll); err != nil {
		if o, refused := s.refusal(t.Ref, stage, err); refused {
			return o, true, nil
		}
		return outcome{}, false, fmt.Errorf("dry-run the %s stage on %s: %w", stage, t, err)
	}
	return outcome{}, false, nil
}

func planSummary(stage placement.Stage, plan []pgv1.TargetPlan) string {
	recreated := int32(0)
	for _, e := range plan {
		recreated += e.RecreatesCount
	}
	return fmt.Sprintf("The %s stage would change %d workload(s) and recreate %d pod(s); see status.plan", stage, len(plan), recreated)
}
