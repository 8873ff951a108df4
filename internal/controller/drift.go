package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/adoption"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
	"github.com/placement-guard/placement-guard/internal/workloadpatch"
)

// maxDriftCorrections is how often an entry removed by another writer is
// written again before the migration stalls and asks a person.
const maxDriftCorrections = 3

// watchDrift keeps every verified entry in place: a writer that removes or
// changes one is named, and the entry is written again with backoff, at
// most three times. The re-write is an operation like any other: recorded,
// written, verified.
func (s *scope) watchDrift(ctx context.Context) (outcome, bool, error) {
	pm := s.pm
	var drifted []*target
	for _, t := range s.targets {
		ts := s.status(t.Ref)
		if s.verified(t) != pgv1.StageNone && !placement.Carries(&t.Template().Spec, planning.EntryOf(ts.Applied)) {
			drifted = append(drifted, t)
		}
	}
	if len(drifted) == 0 {
		return outcome{}, false, nil
	}
	first := drifted[0]
	stage := s.verified(first)
	writer, err := s.r.lastWriter(ctx, first.Object(), s.manager)
	if err != nil {
		return outcome{}, true, err
	}
	if o, taken, err := s.takenBack(ctx, first, writer); taken || err != nil {
		return o, true, err
	}
	what := fmt.Sprintf("%s no longer carries the %s constraint; last changed by field manager %q", first, stage, writer)
	if pm.Status.DriftCorrections >= maxDriftCorrections {
		msg := fmt.Sprintf("%s, after %d re-applies. Commit the constraint where %s is defined (its chart or Git source) so that %q stops removing it, then set the %s annotation",
			what, pm.Status.DriftCorrections, first, writer, pgv1.RetryAnnotation)
		setCondition(pm, s.now, pgv1.ConditionConstraintInSync, metav1.ConditionFalse, pgv1.ReasonDriftRetriesExceeded, msg)
		return s.halt(pgv1.HaltFailed, outcome{reason: pgv1.ReasonDriftRetriesExceeded, message: msg,
			events: []note{{kind: corev1.EventTypeWarning, reason: pgv1.ReasonDriftRetriesExceeded, message: msg}}}), true, nil
	}
	// Until the entry is written again the migration is not where it was
	// asked to be: Ready is False, and the phase (derive) says the stage is
	// being applied again, not that it succeeded.
	backoff := 5 * time.Second << pm.Status.DriftCorrections
	c := meta.FindStatusCondition(pm.Status.Conditions, pgv1.ConditionConstraintInSync)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != pgv1.ReasonDrifted {
		msg := fmt.Sprintf("%s; writing it again after %s", what, backoff)
		setCondition(pm, s.now, pgv1.ConditionConstraintInSync, metav1.ConditionFalse, pgv1.ReasonDrifted, msg)
		return outcome{reason: pgv1.ReasonDrifted, message: msg, after: backoff,
			events: []note{{kind: corev1.EventTypeWarning, reason: pgv1.ReasonDrifted, message: what}}}, true, nil
	}
	if wait := c.LastTransitionTime.Add(backoff).Sub(s.now); wait > 0 {
		return outcome{reason: pgv1.ReasonDrifted, message: c.Message, after: wait}, true, nil
	}
	if o, ok := s.checkOthers(drifted); ok {
		return o, true, nil
	}
	// A write the API server would refuse (a field another manager took
	// over) is not made, nor counted as a correction: the migration is
	// Blocked, naming the owner, and writes again once it is not refused.
	for _, t := range drifted {
		o, refused, err := s.dryRun(ctx, t, planning.EntryOf(s.status(t.Ref).Applied), stage)
		if refused || err != nil {
			return o, true, err
		}
	}
	op := s.newOperation(pgv1.ActionReapply, s.carried(first, s.status(first.Ref)), stage)
	for _, t := range drifted {
		ts := s.status(t.Ref)
		op.Targets = append(op.Targets, s.operationTarget(t, planning.EntryOf(ts.Applied), t.Entry(s.carried(t, ts))))
	}
	pm.Status.DriftCorrections++
	msg := fmt.Sprintf("%s; writing it again (%d of %d)", what, pm.Status.DriftCorrections, maxDriftCorrections)
	setCondition(pm, s.now, pgv1.ConditionConstraintInSync, metav1.ConditionFalse, pgv1.ReasonDrifted, msg)
	return s.recordIntent(op, outcome{reason: pgv1.ReasonDrifted, message: msg,
		events: []note{{kind: corev1.EventTypeWarning, reason: pgv1.ReasonDrifted, message: msg}}}), true, nil
}

// adoptUnverified verifies, without writing, a stage a target carries
// that no verified record covers: the record of a write was lost (the
// operator died before recording it, or someone cleared the status). The
// stage is verified and, for Soft, soaked again before anything stronger.
func (s *scope) adoptUnverified() (outcome, bool) {
	var group []*target
	var stage pgv1.Stage
	for _, t := range s.targets {
		carried := t.Rendered.StageOf(&t.Template().Spec, t.Selector())
		if carried.Rank() <= s.verified(t).Rank() {
			continue
		}
		if group == nil {
			stage = carried
		}
		if carried == stage {
			group = append(group, t)
		}
	}
	if len(group) == 0 {
		return outcome{}, false
	}
	if o, ok := s.checkOthers(group); ok {
		return o, true
	}
	op := s.newOperation(pgv1.ActionVerify, s.verified(group[0]), stage)
	for _, t := range group {
		op.Targets = append(op.Targets, s.operationTarget(t, t.Entry(stage), t.Entry(s.verified(t))))
	}
	return s.recordIntent(op, outcome{reason: pgv1.ReasonUnverified, message: fmt.Sprintf(
		"%s carries the %s stage, but no verified record of it was found; verifying it (and soaking a Soft stage) before anything stronger", targetNames(group), stage)}), true
}

// releaseRemoved handles workloads that stopped being targets: with
// onDelete Revert their entry is removed (a recorded operation like any
// write), with Retain they are forgotten and keep it.
func (s *scope) releaseRemoved(gone []pgv1.TargetStatus) outcome {
	var names []string
	for _, ts := range gone {
		names = append(names, ts.Ref().String())
	}
	if s.pm.Spec.OnDelete != pgv1.DeletionRevert {
		for _, ts := range gone {
			s.retain(ts)
			s.forget(ts.Kind, ts.Name)
		}
		return outcome{reason: pgv1.ReasonTargetRemoved,
			message: fmt.Sprintf("%s no longer selected; the constraint stays on it (onDelete: Retain), and its pods are counted with the targets'", strings.Join(names, ", "))}
	}
	op := s.newOperation(pgv1.ActionRevert, placement.StageOfEntry(planning.EntryOf(gone[0].Applied)), pgv1.StageNone)
	for _, ts := range gone {
		op.Targets = append(op.Targets, pgv1.OperationTarget{Kind: ts.Kind, Name: ts.Name, UID: ts.UID, Previous: ts.Applied})
	}
	return s.recordIntent(op, outcome{reason: pgv1.ReasonTargetRemoved,
		message: fmt.Sprintf("%s no longer selected; removing the constraint from it (onDelete: Revert)", strings.Join(names, ", "))})
}

// takenBack ends the adoption of a constraint its author took out of the
// workload where the admission check did not see it (the namespace Off or
// Warn at the time, the check down): the constraint is the workload's
// own, and its removal by another writer is the author's word, never
// drift to write back. The record is marked ended on the workload, in a
// write locked to the workload as read; the adoption controller then
// deletes this migration. A take-back that removed the record with the
// constraint (kubectl rollout undo puts back the old annotations) or
// found it ended leaves nothing to mark: the migration waits to be
// deleted, and writes nothing back either. taken is false for a
// migration that adopted nothing on t.
func (s *scope) takenBack(ctx context.Context, t *target, writer string) (o outcome, taken bool, err error) {
	obj := t.Object()
	if !s.adoptedFrom(obj) {
		return outcome{}, false, nil
	}
	records, err := adoption.Records(obj.GetAnnotations())
	if err != nil {
		// An unreadable record is not the author's word: drift as usual.
		return outcome{}, false, nil
	}
	i := slices.IndexFunc(records, func(r adoption.Record) bool { return r.Migration == s.pm.Name })
	what := "its adopted constraint"
	if i >= 0 {
		what = "its adopted " + describeAdopted(&records[i])
	}
	if i >= 0 && records[i].Active() {
		if err := s.markEnded(ctx, t, records[i], "taken back by "+writer); err != nil {
			return outcome{}, true, err
		}
	}
	msg := fmt.Sprintf("%s no longer carries %s: field manager %q took it out, which ends the adoption. It is not written back, and this migration is deleted; the workload stays as its author left it",
		t, what, writer)
	o = outcome{reason: pgv1.ReasonAdoptionTakenBack, message: msg}
	if c := meta.FindStatusCondition(s.pm.Status.Conditions, pgv1.ConditionConstraintInSync); c == nil || c.Reason != pgv1.ReasonAdoptionTakenBack {
		// Told once: the migration waits here for its deletion, and every
		// look until then would say it again.
		o.events = []note{{kind: corev1.EventTypeNormal, reason: pgv1.ReasonAdoptionTakenBack, message: msg}}
	}
	setCondition(s.pm, s.now, pgv1.ConditionConstraintInSync, metav1.ConditionFalse, pgv1.ReasonAdoptionTakenBack, msg)
	return o, true, nil
}

// adoptedFrom reports whether this migration is one the adoption of a
// constraint of obj made: labelled so, and controlled by obj.
func (s *scope) adoptedFrom(obj client.Object) bool {
	return s.pm.Labels[adoption.AdoptedLabel] == obj.GetName() && metav1.IsControlledBy(s.pm, obj)
}

// markEnded marks rec ended on the workload for why, in a write locked
// to the workload as read.
func (s *scope) markEnded(ctx context.Context, t *target, rec adoption.Record, why string) error {
	obj := t.Object().DeepCopyObject().(client.Object)
	before := obj.DeepCopyObject().(client.Object)
	if err := endAdoption(obj, rec, why); err != nil {
		return err
	}
	if err := s.r.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}), client.FieldOwner(s.manager)); err != nil {
		if apierrors.IsConflict(err) {
			return errStale
		}
		return fmt.Errorf("end the adoption on %s: %w", t, err)
	}
	return nil
}

// describeAdopted names an adopted constraint in a few words.
func describeAdopted(rec *adoption.Record) string {
	if rec.Term != nil {
		return "required anti-affinity on " + rec.Term.TopologyKey
	}
	return "DoNotSchedule spread on " + rec.Spread.TopologyKey
}

// lastWriter names the field manager that changed the workload last, from
// its managed fields, which the cache does not keep. Managed fields carry
// times to the second only, so among writers of the same second the one
// that now owns placement fields of the pod template is taken: that is who
// replaced ours.
func (r *PlacementMigrationReconciler) lastWriter(ctx context.Context, obj client.Object, ours string) (string, error) {
	live := obj.DeepCopyObject().(client.Object)
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
		return "", fmt.Errorf("read managed fields of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	writer, newest, placementOwner := "unknown", time.Time{}, false
	for _, mf := range live.GetManagedFields() {
		if mf.Manager == ours || mf.Subresource != "" || mf.Time == nil {
			continue
		}
		if _, migration := workloadpatch.MigrationOf(mf.Manager); migration && !workloadpatch.OwnsPlacementFields(mf) {
			continue
		}
		owns := workloadpatch.OwnsPlacementFields(mf)
		if mf.Time.After(newest) || (mf.Time.Time.Equal(newest) && owns && !placementOwner) {
			writer, newest, placementOwner = mf.Manager, mf.Time.Time, owns
		}
	}
	return writer, nil
}
