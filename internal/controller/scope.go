package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/targets"
	"github.com/placement-guard/placement-guard/internal/workloadpatch"
)

// maxTargets is how many workloads the status can record.
const maxTargets = 50

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
	missing []string
	// selected is how many workloads the spec names or selects.
	selected int
	// others are the namespace's other migrations.
	others []pgv1.PlacementMigration
}

// target is one workload of the migration: the workload behind one type,
// and the constraint as it is written into it.
type target struct {
	*targets.Target
	ref      pgv1.TargetRef
	rendered placement.Constraint
}

// entry is what the stage writes into the target.
func (t *target) entry(stage placement.Stage) *corev1.PodSpec {
	e, err := t.rendered.Entry(t.Selector(), stage)
	if err != nil {
		return nil
	}
	return e
}

// patchTarget names the target for workloadpatch.
func (t *target) patchTarget() workloadpatch.Target {
	return workloadpatch.Target{Kind: t.Kind(), Namespace: t.Object().GetNamespace(), Name: t.Name(), UID: t.UID()}
}

// newScope reads what the migration needs from the cache.
func (r *PlacementMigrationReconciler) newScope(ctx context.Context, pm *pgv1.PlacementMigration) (*scope, error) {
	s := &scope{r: r, pm: pm, now: r.Clock.Now(), manager: workloadpatch.FieldManager(pm.Name), constraint: constraintFromSpec(pm.Spec.Constraint)}
	refs, err := r.targetRefs(ctx, pm)
	if err != nil {
		return nil, err
	}
	s.selected = len(refs)
	if len(refs) > maxTargets {
		return s, nil
	}
	if err := s.loadTargets(ctx, refs); err != nil {
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

// loadTargets reads the workloads, their ReplicaSets and pods.
func (s *scope) loadTargets(ctx context.Context, refs []pgv1.TargetRef) error {
	r, ns := s.r, s.pm.Namespace
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("list pods in %s: %w", ns, err)
	}
	live := make([]*corev1.Pod, 0, len(pods.Items))
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil {
			live = append(live, &pods.Items[i])
		}
	}
	var replicaSets []*appsv1.ReplicaSet
	for _, ref := range refs {
		key := client.ObjectKey{Namespace: ns, Name: ref.Name}
		var t *targets.Target
		switch ref.Kind {
		case pgv1.KindDeployment:
			d := &appsv1.Deployment{}
			if err := r.Get(ctx, key, d); err != nil {
				if apierrors.IsNotFound(err) {
					s.missing = append(s.missing, string(ref.Kind)+"/"+ref.Name)
					continue
				}
				return fmt.Errorf("get Deployment %s: %w", key, err)
			}
			if replicaSets == nil {
				var err error
				if replicaSets, err = r.replicaSets(ctx, ns); err != nil {
					return err
				}
			}
			t = targets.NewDeployment(d, replicaSets, live)
		case pgv1.KindStatefulSet:
			st := &appsv1.StatefulSet{}
			if err := r.Get(ctx, key, st); err != nil {
				if apierrors.IsNotFound(err) {
					s.missing = append(s.missing, string(ref.Kind)+"/"+ref.Name)
					continue
				}
				return fmt.Errorf("get StatefulSet %s: %w", key, err)
			}
			t = targets.NewStatefulSet(st, live)
		}
		s.targets = append(s.targets, &target{Target: t, ref: ref})
	}
	all := make([]*placement.Workload, len(s.targets))
	for i, t := range s.targets {
		all[i] = t.Workload
	}
	for _, t := range s.targets {
		t.rendered = s.constraint.RenderFor(t.Workload, all)
	}
	return nil
}

// targetRefs lists the workloads the spec names or selects, in a stable order.
func (r *PlacementMigrationReconciler) targetRefs(ctx context.Context, pm *pgv1.PlacementMigration) ([]pgv1.TargetRef, error) {
	if pm.Spec.TargetSelector == nil {
		return pm.Spec.Targets, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(pm.Spec.TargetSelector.Selector.AsMeta())
	if err != nil {
		return nil, fmt.Errorf("targetSelector: %w", err)
	}
	kinds := pm.Spec.TargetSelector.Kinds
	if len(kinds) == 0 {
		kinds = []pgv1.WorkloadKind{pgv1.KindDeployment, pgv1.KindStatefulSet}
	}
	var refs []pgv1.TargetRef
	opts := []client.ListOption{client.InNamespace(pm.Namespace), client.MatchingLabelsSelector{Selector: sel}}
	for _, kind := range kinds {
		switch kind {
		case pgv1.KindDeployment:
			var list appsv1.DeploymentList
			if err := r.List(ctx, &list, opts...); err != nil {
				return nil, fmt.Errorf("list Deployments selected by %s: %w", sel, err)
			}
			for _, d := range list.Items {
				refs = append(refs, pgv1.TargetRef{Kind: kind, Name: d.Name})
			}
		case pgv1.KindStatefulSet:
			var list appsv1.StatefulSetList
			if err := r.List(ctx, &list, opts...); err != nil {
				return nil, fmt.Errorf("list StatefulSets selected by %s: %w", sel, err)
			}
			for _, st := range list.Items {
				refs = append(refs, pgv1.TargetRef{Kind: kind, Name: st.Name})
			}
		}
	}
	sort.Slice(refs, func(i, j int) bool { return refKey(refs[i]) < refKey(refs[j]) })
	return refs, nil
}

func refKey(ref pgv1.TargetRef) string { return string(ref.Kind) + "/" + ref.Name }

func (r *PlacementMigrationReconciler) replicaSets(ctx context.Context, namespace string) ([]*appsv1.ReplicaSet, error) {
	var list appsv1.ReplicaSetList
	if err := r.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list ReplicaSets in %s: %w", namespace, err)
	}
	out := make([]*appsv1.ReplicaSet, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
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
		if t.ref.Kind == kind && t.ref.Name == name {
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
		ts := s.status(t.ref)
		if ts.UID != string(t.UID()) {
			*ts = pgv1.TargetStatus{Kind: t.ref.Kind, Name: t.ref.Name, UID: string(t.UID()), Before: beforeOf(&t.Template().Spec)}
		}
		ts.Stage = pgv1.Stage(s.carried(t, ts))
	}
	s.pm.Status.FieldManager = s.manager
}

// carried is the stage of the migration's entry the live template carries:
// the recorded entry when it is there, else whichever stage of the current
// constraint it carries.
func (s *scope) carried(t *target, ts *pgv1.TargetStatus) placement.Stage {
	if ts.Applied != nil && placement.Carries(&t.Template().Spec, entryOf(ts.Applied)) {
		return placement.StageOfEntry(entryOf(ts.Applied))
	}
	return t.rendered.StageOf(&t.Template().Spec, t.Selector())
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
	for _, m := range s.missing {
		if m == string(kind)+"/"+name {
			return true
		}
	}
	return false
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
	return firstFew(names, 5)
}

func missingMessage(missing []string, ns string) string {
	return fmt.Sprintf("%s not found in namespace %s; create it or correct spec.targets", strings.Join(missing, ", "), ns)
}
