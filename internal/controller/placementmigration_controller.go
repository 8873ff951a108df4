// Package controller holds the reconcilers of placement-guard. They read the
// cluster, ask the domain packages what to do, act and record; the judgement
// itself lives in those packages.
package controller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// FieldManager is the server-side apply field manager of everything the
// operator writes.
const FieldManager = "placement-guard"

// PlacementMigrationReconciler drives PlacementMigrations.
type PlacementMigrationReconciler struct {
	client.Client
	Scheme *runtime.Scheme
}

// +kubebuilder:rbac:groups=placementguard.io,resources=placementmigrations,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=placementguard.io,resources=placementmigrations/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=placementguard.io,resources=placementmigrations/finalizers,verbs=update

// Reconcile records that the migration was observed. The guarded migration
// itself (capacity, feasibility, stages, rollback) is built on the placement
// engine and arrives with it.
func (r *PlacementMigrationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pm pgv1.PlacementMigration
	if err := r.Get(ctx, req.NamespacedName, &pm); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get PlacementMigration %s: %w", req.NamespacedName, err)
	}
	if pm.Status.ObservedGeneration == pm.Generation && pm.Status.Phase != "" {
		return ctrl.Result{}, nil
	}
	before := pm.DeepCopy()
	summarize(&pm, outcome{phase: pgv1.PhasePending, reason: pgv1.ReasonProgressing, message: "Migration accepted; nothing has been changed yet"})
	if err := r.Status().Patch(ctx, &pm, client.MergeFrom(before)); err != nil {
		return ctrl.Result{}, fmt.Errorf("patch status of PlacementMigration %s: %w", req.NamespacedName, err)
	}
	return ctrl.Result{}, nil
}

// SetupWithManager registers the reconciler with the manager.
func (r *PlacementMigrationReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&pgv1.PlacementMigration{}).
		Named("placementmigration").
		Complete(r)
}
