package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/brief"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
	"github.com/placement-guard/placement-guard/internal/targets"
	"github.com/placement-guard/placement-guard/internal/workloadpatch"
)

// scope is what one reconcile of one migration read, carried from step to
// step: the migration, its targets as they are now, and the other
// migrations of the namespace.
type scope struct {
	r   *PlacementMigrationReconciler
	pm  *pgv1.PlacementMigration
	now time.Time
	// manager is the migration's server-side apply field manager.
	manager    string
	constraint placement.Constraint
	targets    []*target
	// missing are targets named in the spec that do not exist.
	missing []pgv1.TargetRef
	// selected is how many workloads the spec names or selects.
	selected int
	// others are the namespace's other migrations.
	others []pgv1.PlacementMigration
	// asked is the capacity request recorded when the reconcile began, and
	// request what the engine says the final stage lacks, when it was asked.
	asked   *pgv1.CapacityRequestStatus
	request *placement.CapacityRequest
	// launched names the nodes created since the request was made that
	// its placeholders could land on; nodes are the nodes there are, read
	// when a request may be recorded in this reconcile.
	launched []string
	nodes    []string
	// retained are the former targets that keep the migration's entry,
	// and retainedKept their records.
	retained     []*targets.Target
	retainedKept []pgv1.RetainedTarget
	// recheck asks for another look once a timer a step noticed runs out,
	// whatever the step's outcome: a Pending pod's grace.
	recheck time.Duration
	// viewCatchingUp: the step waited for its view of the pods, which
	// lags with no cause known (a new migration says so only if it lasts).
	viewCatchingUp bool
	// viewCause: the step waited for its view of the pods, which stays
	// short for a cause the workload's controller names (a quota): a
	// diagnosis, written at once, however recently the status was.
	viewCause bool
	// settling: every target runs all its replicas, and pods its last
	// rollout deleted are still leaving (a success waits a moment for
	// them, so that it is written with its DisruptionReady verdict).
	settling bool
	// held is the intent recorded ahead that the migration holds through
	// its soak (held.go), and justVerified says that this reconcile
	// verified a stage, the one that may hold the next stage's intent.
	held         *pgv1.Operation
	justVerified bool
	// current: pm is the record the API server holds, as this reconcile's
	// own status write returned it; a write it names needs no fresh read.
	current bool
}

// lookAgainIn asks for another look after d; 0 asks for none.
func (s *scope) lookAgainIn(d time.Duration) {
	s.recheck = planning.Shortest(s.recheck, d)
}

// target is one workload of the migration: the workload behind one type,
// and the constraint as it is written into it.
type target struct {
	*planning.Target
}

// planned are the targets as planning knows them.
func planned(ts []*target) []*planning.Target {
	out := make([]*planning.Target, len(ts))
	for i, t := range ts {
		out[i] = t.Target
	}
	return out
}

// patchTarget names the target for workloadpatch.
func (t *target) patchTarget() workloadpatch.Target {
	return workloadpatch.Target{Kind: t.Kind(), Namespace: t.Object().GetNamespace(), Name: t.Name(), UID: t.UID()}
}

// newScope reads what the migration needs from the cache.
func (r *PlacementMigrationReconciler) newScope(ctx context.Context, pm *pgv1.PlacementMigration) (*scope, error) {
	s := &scope{r: r, pm: pm, now: r.Clock.Now(), manager: workloadpatch.FieldManager(pm.Name), constraint: planning.ConstraintFromSpec(pm.Spec.Constraint)}
	if c := pm.Status.Capacity; c != nil && c.Request != nil {
		s.asked = c.Request.DeepCopy()
	}
	refs, err := r.targetRefs(ctx, pm)
	if err != nil {
		return nil, err
	}
	s.selected = len(refs)
	if planning.TooManyTargets(len(refs)) != nil {
		return s, nil
	}
	if err := s.loadTargets(ctx, refs); err != nil {
		return nil, err
	}
	if err := s.loadRetained(ctx); err != nil {
		return nil, err
	}
	var list pgv1.PlacementMigrationList
	if err := r.List(ctx, &list, client.InNamespace(pm.Namespace)); err != nil {
		return nil, fmt.Errorf("list PlacementMigrations in %s: %w", pm.Namespace, err)
	}
	for _, o := range list.Items {
		if o.Name != pm.Name {
			s.others = append(s.others, o)
		}
	}
	return s, nil
}

// status is the status entry of a target, added when first seen.
func (s *scope) status(ref pgv1.TargetRef) *pgv1.TargetStatus {
	for i := range s.pm.Status.Targets {
		ts := &s.pm.Status.Targets[i]
		if ts.Kind == ref.Kind && ts.Name == ref.Name {
			return ts
		}
	}
	s.pm.Status.Targets = append(s.pm.Status.Targets, pgv1.TargetStatus{Kind: ref.Kind, Name: ref.Name, Stage: pgv1.StageNone})
	return &s.pm.Status.Targets[len(s.pm.Status.Targets)-1]
}

// target finds a current target by reference.
func (s *scope) target(kind pgv1.WorkloadKind, name string) *target {
	for _, t := range s.targets {
		if t.Ref.Kind == kind && t.Ref.Name == name {
			return t
		}
	}
	return nil
}

// observeTargets keeps one status entry per target: what its template
// carried when first seen (a re-created workload is seen anew), and the
// stage of the migration's entry it carries now.
func (s *scope) observeTargets() {
	for _, t := range s.targets {
		ts := s.status(t.Ref)
		if ts.UID != string(t.UID()) {
			*ts = pgv1.TargetStatus{Kind: t.Ref.Kind, Name: t.Ref.Name, UID: string(t.UID()), Before: beforeOf(&t.Template().Spec)}
		}
		ts.Stage = s.carried(t, ts)
	}
	s.pm.Status.FieldManager = s.manager
	s.observeRetained()
}

// carried is the stage of the migration's entry the live template carries:
// the recorded entry when it is there, else whichever stage of the current
// constraint it carries.
func (s *scope) carried(t *target, ts *pgv1.TargetStatus) pgv1.Stage {
	if ts.Applied != nil && placement.Carries(&t.Template().Spec, planning.EntryOf(ts.Applied)) {
		return placement.StageOfEntry(planning.EntryOf(ts.Applied))
	}
	return t.Rendered.StageOf(&t.Template().Spec, t.Selector())
}

// removed are the status entries of workloads that are no longer targets.
func (s *scope) removed() []pgv1.TargetStatus {
	var out []pgv1.TargetStatus
	for _, ts := range s.pm.Status.Targets {
		if s.target(ts.Kind, ts.Name) == nil && !s.isMissing(ts.Kind, ts.Name) {
			out = append(out, ts)
		}
	}
	return out
}

func (s *scope) isMissing(kind pgv1.WorkloadKind, name string) bool {
	return slices.Contains(s.missing, pgv1.TargetRef{Kind: kind, Name: name})
}

func (s *scope) forget(kind pgv1.WorkloadKind, name string) {
	out := s.pm.Status.Targets[:0]
	for _, ts := range s.pm.Status.Targets {
		if ts.Kind != kind || ts.Name != name {
			out = append(out, ts)
		}
	}
	s.pm.Status.Targets = out
}

func targetNames(ts []*target) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.String()
	}
	return brief.FirstFew(names, 5, "; ")
}

func missingMessage(missing []pgv1.TargetRef, ns string) string {
	names := make([]string, len(missing))
	for i, ref := range missing {
		names[i] = ref.String()
	}
	return fmt.Sprintf("%s not found in namespace %s; create it or correct spec.targets", strings.Join(names, ", "), ns)
}
