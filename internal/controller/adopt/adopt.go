// Package adopt makes the PlacementMigrations of Adopt mode from the
// records the admission check leaves on workloads (internal/adoption),
// and ends an adoption a person stopped. The migration reconciler writes
// their stages; this package makes and deletes the migrations and marks
// the records.
package adopt

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/adoption"
	"github.com/placement-guard/placement-guard/internal/targets"
)

// Event reasons of Adopt mode, on the workload.
const (
	ReasonAdopted       = "Adopted"
	ReasonAdoptionFails = "AdoptionFailed"
	// ReasonAdoptionDropped: the author's manifest dropped an adopted
	// constraint before it hardened; its migration is deleted.
	ReasonAdoptionDropped = "AdoptionDropped"
	// ReasonAdoptionEnded: the adoption ended (its migration aborted or
	// deleted, the constraint taken back by a rollback); no migration is
	// made of it again until its author changes the constraint.
	ReasonAdoptionEnded = "AdoptionEnded"
)

// adoptionManager is the field manager of the operator's writes to the
// adoption records on workloads: the operator's, so the admission check
// exempts them from the operator's own user.
const adoptionManager = "placement-guard/adoption-records"

// Reconciler makes the PlacementMigrations of Adopt mode: for each
// record the admission check left on a workload (adoption.Annotation), a
// migration of that constraint with the workload as its one target, owned
// by it, so that deleting the workload deletes the migration. It makes a
// record's migration once, and marks the record with its uid: a migration
// that exists is left for people to steer (pause it, change its soak), and
// one that is gone (aborted, deleted) ends the adoption, which the record
// then says, so that nothing hardens again what a person stopped. A record
// ended (by that, or a rollback the admission check saw) has its migration
// deleted and none made until its author changes the constraint; removing
// the annotation lets the constraint go as it is.
type Reconciler struct {
	client.Client
	// APIReader reads the migrations from the API server: whether a
	// migration made for a record is gone is never judged on a cache that
	// may not hold it yet.
	APIReader client.Reader
	Recorder  events.EventRecorder
}

// +kubebuilder:rbac:groups=placementguard.io,resources=placementmigrations,verbs=create;delete

// Reconcile makes the missing migrations of one workload's records.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	workloads, err := targets.Named(ctx, r.Client, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, err
	}
	for _, obj := range workloads {
		records, err := adoption.Records(obj.GetAnnotations())
		if err != nil {
			r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonAdoptionFails, "Adopt", "%v; the constraints it adopted stay soft until it is fixed or removed", err)
			continue
		}
		if err := r.letGo(ctx, obj, records); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.follow(ctx, obj, records); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// follow makes the migration of each active record that has none yet and
// marks the record with it, and ends the adoption of a record whose
// migration is gone or going, writing the records back once.
func (r *Reconciler) follow(ctx context.Context, obj client.Object, records []adoption.Record) error {
	kind := targets.KindOf(obj)
	updated := records
	var ended []string
	for _, rec := range records {
		if !rec.Active() {
			continue
		}
		pm, err := r.migrationOf(ctx, obj, rec)
		if err != nil {
			return err
		}
		switch {
		case pm != nil && !pm.DeletionTimestamp.IsZero() && controllerutil.ContainsFinalizer(pm, pgv1.RevertFinalizer):
			// Aborted: its revert ends the adoption in the write that
			// gives the soft form back.
		case rec.Made != "" && (pm == nil || string(pm.UID) != rec.Made || !pm.DeletionTimestamp.IsZero()):
			why := fmt.Sprintf("PlacementMigration %s was deleted", rec.Migration)
			updated = adoption.Ending(updated, []adoption.Record{rec}, why)
			ended = append(ended, fmt.Sprintf("%s (%s)", describeRecord(rec), why))
		case rec.Made == "" && pm == nil:
			made, err := r.ensure(ctx, obj, kind, rec)
			if err != nil || made == nil {
				return err
			}
			updated = adoption.Marked(updated, rec.Migration, string(made.UID))
		case rec.Made == "" && metav1.IsControlledBy(pm, obj):
			// Made before a crash kept the mark from being written.
			updated = adoption.Marked(updated, rec.Migration, string(pm.UID))
		}
	}
	if slices.Equal(updated, records) {
		return nil
	}
	if err := r.writeRecords(ctx, obj, updated); err != nil {
		return err
	}
	for _, e := range ended {
		r.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, ReasonAdoptionEnded, "Adopt",
			"The adoption of the %s ended: it stays as it is, and no migration is made of it again until its author changes it", e)
	}
	return nil
}

// migrationOf is the migration of a record as the API server has it, nil
// when there is none.
func (r *Reconciler) migrationOf(ctx context.Context, obj client.Object, rec adoption.Record) (*pgv1.PlacementMigration, error) {
	pm := &pgv1.PlacementMigration{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: rec.Migration}, pm)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get PlacementMigration %s/%s: %w", obj.GetNamespace(), rec.Migration, err)
	}
	return pm, nil
}

// writeRecords writes the workload's adoption annotation, locked to the
// workload as read: a record a write of the workload changed meanwhile
// is read again, not overwritten.
func (r *Reconciler) writeRecords(ctx context.Context, obj client.Object, records []adoption.Record) error {
	value, err := adoption.Encode(records)
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": obj.GetResourceVersion(), "annotations": map[string]string{adoption.Annotation: value}}})
	if err != nil {
		return err
	}
	err = r.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(adoptionManager))
	if apierrors.IsConflict(err) {
		// Written meanwhile (another replica's mark, the author's next
		// apply): that write's event brings the reconcile that reads it.
		return nil
	}
	if err != nil {
		return fmt.Errorf("write the adoption records of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// ensure creates the migration of one record, and returns it; nil when
// it could not be made (said in an Event).
func (r *Reconciler) ensure(ctx context.Context, obj client.Object, kind *targets.Kind, rec adoption.Record) (*pgv1.PlacementMigration, error) {
	pm := &pgv1.PlacementMigration{
		ObjectMeta: metav1.ObjectMeta{Namespace: obj.GetNamespace(), Name: rec.Migration, Labels: map[string]string{adoption.AdoptedLabel: obj.GetName()}},
		Spec: pgv1.PlacementMigrationSpec{
			Targets:    []pgv1.TargetRef{{Kind: kind.Name, Name: obj.GetName()}},
			Constraint: rec.Constraint(),
		},
	}
	// Not blocking the owner's deletion: that would need the right to
	// update the workloads' finalizers, where OwnerReferencesPermission-
	// Enforcement is on, and the migration holds nothing the workload's
	// deletion must wait for.
	if err := controllerutil.SetControllerReference(obj, pm, r.Scheme(), controllerutil.WithBlockOwnerDeletion(false)); err != nil {
		return nil, fmt.Errorf("own PlacementMigration %s by %s/%s: %w", rec.Migration, kind.Name, obj.GetName(), err)
	}
	switch err := r.Create(ctx, pm); {
	case apierrors.IsAlreadyExists(err):
		// Another replica made it a moment ago: it is the record's if the
		// workload controls it.
		made, err := r.migrationOf(ctx, obj, rec)
		if err != nil || made == nil || !metav1.IsControlledBy(made, obj) {
			return nil, err
		}
		return made, nil
	case apierrors.IsInvalid(err) || apierrors.IsForbidden(err):
		r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonAdoptionFails, "Adopt",
			"PlacementMigration %s could not be made, so the adopted constraint stays soft: %v", rec.Migration, err)
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("create PlacementMigration %s/%s: %w", obj.GetNamespace(), rec.Migration, err)
	}
	r.Recorder.Eventf(obj, pm, corev1.EventTypeNormal, ReasonAdopted, "Adopt",
		"The change's %s was admitted in its soft form; PlacementMigration %s makes it hard once it is safe (kubectl placement status %s)",
		describeRecord(rec), rec.Migration, rec.Migration)
	return pm, nil
}

// letGo deletes the migrations this workload's adoption made whose record
// it no longer carries, or carries ended: its author's manifest dropped
// the constraint (the admission check took the soft form out), someone
// removed the record, or a rollback took the constraint back.
func (r *Reconciler) letGo(ctx context.Context, obj client.Object, records []adoption.Record) error {
	var list pgv1.PlacementMigrationList
	if err := r.List(ctx, &list, client.InNamespace(obj.GetNamespace()), client.MatchingLabels{adoption.AdoptedLabel: obj.GetName()}); err != nil {
		return fmt.Errorf("list the adopted migrations of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	for i := range list.Items {
		pm := &list.Items[i]
		owner := metav1.GetControllerOf(pm)
		if owner == nil || owner.UID != obj.GetUID() || !pm.DeletionTimestamp.IsZero() ||
			slices.ContainsFunc(records, func(rec adoption.Record) bool { return rec.Migration == pm.Name && rec.Active() }) {
			continue
		}
		if err := r.Delete(ctx, pm, client.Preconditions{UID: &pm.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete PlacementMigration %s/%s, whose constraint was dropped: %w", pm.Namespace, pm.Name, err)
		}
		if i := slices.IndexFunc(records, func(rec adoption.Record) bool { return rec.Migration == pm.Name }); i >= 0 {
			r.Recorder.Eventf(obj, pm, corev1.EventTypeNormal, ReasonAdoptionEnded, "Adopt",
				"PlacementMigration %s deleted: the adoption of the %s ended (%s); it stays as it is until its author changes it",
				pm.Name, describeRecord(records[i]), records[i].Ended)
			continue
		}
		r.Recorder.Eventf(obj, pm, corev1.EventTypeNormal, ReasonAdoptionDropped, "Adopt",
			"PlacementMigration %s deleted: %s no longer carries the constraint it adopted", pm.Name, obj.GetName())
	}
	return nil
}

func describeRecord(rec adoption.Record) string {
	if rec.Term != nil {
		return "required anti-affinity on " + rec.Term.TopologyKey
	}
	return "DoNotSchedule spread on " + rec.Spread.TopologyKey
}

// SetupWithManager watches the workloads that carry records.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	has := func(obj client.Object) bool {
		_, ok := obj.GetAnnotations()[adoption.Annotation]
		return ok
	}
	// An update that removes the last record is seen too: its migration
	// goes.
	recorded := predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return has(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return has(e.ObjectOld) || has(e.ObjectNew) },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(e event.GenericEvent) bool { return has(e.Object) },
	}
	b := ctrl.NewControllerManagedBy(mgr).Named("adoption")
	for _, k := range targets.Kinds() {
		b = b.Watches(k.New(), &handler.EnqueueRequestForObject{}, builder.WithPredicates(recorded))
	}
	// A migration made for a record, deleted or aborted, ends the adoption:
	// its workload (named by the label) is looked at again.
	b = b.Watches(&pgv1.PlacementMigration{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		workload, ok := obj.GetLabels()[adoption.AdoptedLabel]
		if !ok {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: workload}}}
	}))
	return b.Complete(r)
}
