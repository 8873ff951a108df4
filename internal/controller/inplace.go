package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/adoption"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/targets"
)

// A migration made by Adopt mode writes its stages differently. The
// constraint is the workload's own, in its manifest: the lists that hold
// it (the anti-affinity term lists are atomic) belong to the workload's
// field manager, a Helm release or a GitOps tool, and a server-side apply
// of the migration's entry would either be refused or take the whole list
// over. Instead the term is moved between its forms in place, in a patch
// that carries the workload's resourceVersion, exactly as the record
// says: the hard form goes back where the manifest had it, so that the
// workload ends as its manifest says and a GitOps diff finds nothing.
//
// Only a record the workload carries is acted on: it was written by a
// change to the workload, by someone who may change it. A migration whose
// name or constraint does not match a record on its target writes with
// server-side apply as every other.

// adoptedRecord is the record of the migration's constraint on the
// workload obj, when the stage entry is that record's: nil otherwise.
func adoptedRecord(obj client.Object, migration string, entry *corev1.PodSpec) *adoption.Record {
	rec, err := adoption.Find(obj.GetAnnotations(), migration)
	if err != nil || rec == nil {
		return nil
	}
	stage := placement.StageOfEntry(entry)
	if stage == pgv1.StageNone {
		return rec
	}
	if !placement.Carries(rec.Place(&corev1.PodSpec{}, stage), entry) {
		return nil
	}
	return rec
}

// writeAdopted moves the migration's adopted constraint in the recorded
// target to the stage of entry, never below its soft form: the manifest
// asked for the constraint (hard), Adopt admitted it soft, and a rollback
// or a revert gives back what was admitted, never strips what the
// manifest wrote. ending, when set, ends the adoption in the same write
// (a revert: the migration was aborted or deleted), so that the operator
// makes no migration of it again. adopted is false, and nothing is
// written, when the target carries no record of this migration's
// constraint: the write is then the migration's own server-side apply.
func (r *PlacementMigrationReconciler) writeAdopted(ctx context.Context, pm *pgv1.PlacementMigration, ot *pgv1.OperationTarget, entry *corev1.PodSpec, manager, ending string) (generation int64, adopted bool, err error) {
	kind := targets.KindNamed(string(ot.Kind))
	if kind == nil {
		return 0, false, nil
	}
	obj := kind.New()
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: pm.Namespace, Name: ot.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, false, nil
		}
		return 0, false, fmt.Errorf("read %s/%s before writing its adopted constraint: %w", ot.Kind, ot.Name, err)
	}
	if ot.UID != "" && obj.GetUID() != types.UID(ot.UID) {
		// Another workload of the same name: the apply's uid precondition
		// says so.
		return 0, false, nil
	}
	rec := adoptedRecord(obj, pm.Name, entry)
	if rec == nil {
		return 0, false, nil
	}
	before := obj.DeepCopyObject().(client.Object)
	template := targets.TemplateOf(obj)
	stage := placement.StageOfEntry(entry)
	if stage == pgv1.StageNone {
		stage = pgv1.StageSoft
	}
	template.Spec = *rec.Place(&template.Spec, stage)
	if ending != "" {
		if err := endAdoption(obj, *rec, ending); err != nil {
			return 0, true, err
		}
	}
	patch := client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
	if err := r.Patch(ctx, obj, patch, client.FieldOwner(manager)); err != nil {
		return 0, true, fmt.Errorf("move the adopted constraint of %s/%s to the %s stage: %w", ot.Kind, ot.Name, placement.StageOfEntry(entry), err)
	}
	return max(obj.GetGeneration(), 1), true, nil
}

// endAdoption marks the record of rec's migration ended, for why, in the
// workload's annotation.
func endAdoption(obj client.Object, rec adoption.Record, why string) error {
	records, err := adoption.Records(obj.GetAnnotations())
	if err != nil {
		return err
	}
	value, err := adoption.Encode(adoption.Ending(records, []adoption.Record{rec}, why))
	if err != nil {
		return err
	}
	annotations := obj.GetAnnotations()
	annotations[adoption.Annotation] = value
	obj.SetAnnotations(annotations)
	return nil
}
