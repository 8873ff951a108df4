// Package namespacemode tells a person when a namespace's admission label
// names no mode. The admission check judges such a namespace as Warn,
// never as Off and never as a typo's intent, and says so here: a Warning
// Event on the namespace and placementguard_admission_namespace_mode_unknown,
// so that a `Denny` that was meant to refuse does not pass unseen.
package namespacemode

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/admission"
	"github.com/placement-guard/placement-guard/internal/metrics"
)

// ReasonUnknownAdmissionMode is the Event of a label that names no mode.
const ReasonUnknownAdmissionMode = "UnknownAdmissionMode"

// Reconciler reads one namespace's admission label.
type Reconciler struct {
	client.Client
	Recorder events.EventRecorder
}

// Reconcile says whether the namespace's label names a mode.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, req.NamespacedName, ns); err != nil {
		if apierrors.IsNotFound(err) {
			metrics.RecordUnknownMode(req.Name, false)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("read namespace %s: %w", req.Name, err)
	}
	label, labelled := ns.Labels[pgv1.AdmissionLabel]
	if _, err := admission.ParseMode(label); !labelled || err == nil {
		metrics.RecordUnknownMode(ns.Name, false)
		return ctrl.Result{}, nil
	}
	metrics.RecordUnknownMode(ns.Name, true)
	r.Recorder.Eventf(ns, nil, corev1.EventTypeWarning, ReasonUnknownAdmissionMode, "Judge",
		"Label %s=%q names no admission mode (Warn, Deny, Adopt or Off): the admission check judges this namespace as Warn until it does",
		pgv1.AdmissionLabel, label)
	return ctrl.Result{}, nil
}

// SetupWithManager watches the namespaces whose admission label is set or
// changes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	label := func(o client.Object) (string, bool) {
		v, ok := o.GetLabels()[pgv1.AdmissionLabel]
		return v, ok
	}
	labelled := predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { _, ok := label(e.Object); return ok },
		UpdateFunc: func(e event.UpdateEvent) bool {
			before, hadIt := label(e.ObjectOld)
			after, hasIt := label(e.ObjectNew)
			return hadIt != hasIt || before != after
		},
		DeleteFunc:  func(e event.DeleteEvent) bool { _, ok := label(e.Object); return ok },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	return ctrl.NewControllerManagedBy(mgr).Named("namespacemode").
		For(&corev1.Namespace{}, builder.WithPredicates(labelled)).
		Complete(r)
}
