package controller

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

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
)

// AdoptionReconciler makes the PlacementMigrations of Adopt mode: for each
// record the admission check left on a workload (adoption.Annotation), a
// migration of that constraint with the workload as its one target, owned
// by it, so that deleting the workload deletes the migration. It only
// creates: a migration that exists is left for people to steer (pause it,
// change its soak), and one deleted is made again while the record stays;
// removing the annotation lets the constraint go as it is.
type AdoptionReconciler struct {
	client.Client
	Recorder events.EventRecorder
}

// +kubebuilder:rbac:groups=placementguard.io,resources=placementmigrations,verbs=create;delete

// Reconcile makes the missing migrations of one workload's records.
func (r *AdoptionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	workloads, err := workloadsNamed(ctx, r.Client, req.NamespacedName)
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
		for _, rec := range records {
			if err := r.ensure(ctx, obj, targets.KindOf(obj), rec); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	return ctrl.Result{}, nil
}

// ensure creates the migration of one record unless it exists.
func (r *AdoptionReconciler) ensure(ctx context.Context, obj client.Object, kind *targets.Kind, rec adoption.Record) error {
	existing := &pgv1.PlacementMigration{}
	err := r.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: rec.Migration}, existing)
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("get PlacementMigration %s/%s: %w", obj.GetNamespace(), rec.Migration, err)
	}
	pm := &pgv1.PlacementMigration{
		ObjectMeta: metav1.ObjectMeta{Namespace: obj.GetNamespace(), Name: rec.Migration, Labels: map[string]string{adoption.AdoptedLabel: obj.GetName()}},
		Spec: pgv1.PlacementMigrationSpec{
			Targets:    []pgv1.TargetRef{{Kind: pgv1.WorkloadKind(kind.Name), Name: obj.GetName()}},
			Constraint: rec.Constraint(),
		},
	}
	// Not blocking the owner's deletion: that would need the right to
	// update the workloads' finalizers, where OwnerReferencesPermission-
	// Enforcement is on, and the migration holds nothing the workload's
	// deletion must wait for.
	if err := controllerutil.SetControllerReference(obj, pm, r.Scheme(), controllerutil.WithBlockOwnerDeletion(false)); err != nil {
		return fmt.Errorf("own PlacementMigration %s by %s/%s: %w", rec.Migration, kind.Name, obj.GetName(), err)
	}
	switch err := r.Create(ctx, pm); {
	case apierrors.IsAlreadyExists(err):
		return nil
	case apierrors.IsInvalid(err) || apierrors.IsForbidden(err):
		r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonAdoptionFails, "Adopt",
			"PlacementMigration %s could not be made, so the adopted constraint stays soft: %v", rec.Migration, err)
		return nil
	case err != nil:
		return fmt.Errorf("create PlacementMigration %s/%s: %w", obj.GetNamespace(), rec.Migration, err)
	}
	r.Recorder.Eventf(obj, pm, corev1.EventTypeNormal, ReasonAdopted, "Adopt",
		"The change's %s was admitted in its soft form; PlacementMigration %s makes it hard once it is safe (kubectl placement status %s)",
		describeRecord(rec), rec.Migration, rec.Migration)
	return nil
}

// letGo deletes the migrations this workload's adoption made whose record
// it no longer carries: its author's manifest dropped the constraint (the
// admission check took the soft form out), or someone removed the record.
func (r *AdoptionReconciler) letGo(ctx context.Context, obj client.Object, records []adoption.Record) error {
	var list pgv1.PlacementMigrationList
	if err := r.List(ctx, &list, client.InNamespace(obj.GetNamespace()), client.MatchingLabels{adoption.AdoptedLabel: obj.GetName()}); err != nil {
		return fmt.Errorf("list the adopted migrations of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	for i := range list.Items {
		pm := &list.Items[i]
		owner := metav1.GetControllerOf(pm)
		if owner == nil || owner.UID != obj.GetUID() || slices.ContainsFunc(records, func(rec adoption.Record) bool { return rec.Migration == pm.Name }) {
			continue
		}
		if err := r.Delete(ctx, pm, client.Preconditions{UID: &pm.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete PlacementMigration %s/%s, whose constraint was dropped: %w", pm.Namespace, pm.Name, err)
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
func (r *AdoptionReconciler) SetupWithManager(mgr ctrl.Manager) error {
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
	return b.Complete(r)
}
