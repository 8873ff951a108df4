package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/workloadpatch"
)

// placementOwners names the field managers, other than this migration's,
// that own anti-affinity or spread fields of the target ref ("Kind/name"),
// from its managed fields, which only the API server has.
func (s *scope) placementOwners(ctx context.Context, ref pgv1.TargetRef) (string, error) {
	t := s.target(ref.Kind, ref.Name)
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

// dryRun applies entry to the target as a server-side dry run: a write
// the API server would refuse for good (a field another manager owns, a
// change it rejects) is an outcome, and nothing is written. The dry run
// names the version of the workload the decision read, so that a decision
// made on a cache behind the API server (a scale-up or a quota it has not
// seen yet) records no intent: the migration decides again once its cache
// has caught up (errStaleDecision).
func (s *scope) dryRun(ctx context.Context, t *target, entry *corev1.PodSpec, stage pgv1.Stage) (outcome, bool, error) {
	if adoptedRecord(t.Object(), s.pm.Name, entry) != nil {
		// Moved in place by a patch (adopted.go), which no field manager
		// refuses.
		return outcome{}, false, nil
	}
	wt := t.patchTarget()
	wt.ResourceVersion = t.Object().GetResourceVersion()
	ac, err := workloadpatch.ApplyConfiguration(wt, entry)
	if err != nil {
		return outcome{}, false, err
	}
	if err := s.r.Apply(ctx, ac, client.FieldOwner(s.manager), client.DryRunAll); err != nil {
		if workloadpatch.IsPreconditionFailed(err) {
			return outcome{}, false, fmt.Errorf("dry-run the %s stage on %s, read at resourceVersion %s: %w", stage, t, wt.ResourceVersion, errStaleDecision)
		}
		if o, refused := s.refusal(t.Ref, stage, err); refused {
			return o, true, nil
		}
		return outcome{}, false, fmt.Errorf("dry-run the %s stage on %s: %w", stage, t, err)
	}
	return outcome{}, false, nil
}

func planSummary(stage pgv1.Stage, plan []pgv1.TargetPlan) string {
	recreated := int32(0)
	for _, e := range plan {
		recreated += e.RecreatesCount
	}
	return fmt.Sprintf("The %s stage would change %d workload(s) and recreate %d pod(s); see status.plan", stage, len(plan), recreated)
}
