package webhook

import (
	"cmp"
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	pgadmission "github.com/placement-guard/placement-guard/internal/admission"
)

// Unjudged is what Deny mode does with a change it could not judge: the
// check was busy, the judgement ran out of its budget, or what it is
// judged with could not be read.
type Unjudged string

const (
	// UnjudgedAdmit admits it with a warning that says so (the default):
	// a check that is slow never stops a change.
	UnjudgedAdmit Unjudged = "Admit"
	// UnjudgedRefuse refuses it, saying why: Deny then holds under any
	// load, at the cost of refusing writes the check had no time for.
	UnjudgedRefuse Unjudged = "Refuse"
)

// ParseUnjudged reads what to do with an unjudged change, as the flag and
// the label write it.
func ParseUnjudged(s string) (Unjudged, error) {
	switch u := Unjudged(s); u {
	case UnjudgedAdmit, UnjudgedRefuse:
		return u, nil
	}
	return "", fmt.Errorf("unjudged changes %q: want Admit or Refuse", s)
}

// namespacePolicy is what a namespace's labels ask of the check.
type namespacePolicy struct {
	mode     pgadmission.Mode
	unjudged Unjudged
}

// policy is the namespace's mode and what Deny does with an unjudged
// change: its labels, else the defaults. A label that names no mode (a
// typo: `Denny`) is judged as Warn, never as the default, which may be
// Off: the one who set it wanted the check, and the operator says so on
// the namespace (internal/controller/namespacemode); an unjudged label
// that names nothing is the default. A namespace the cache has not heard
// of yet (created in the same apply as its workloads) is read from the
// API server, within the judgement's time: the apply's next object may
// already be a workload of it, and its mode is what its labels say.
func (v *Validator) policy(ctx context.Context, namespace string) (namespacePolicy, error) {
	p := namespacePolicy{mode: v.Default, unjudged: cmp.Or(v.Unjudged, UnjudgedAdmit)}
	ns, err := v.namespace(ctx, namespace)
	if err != nil {
		return p, err
	}
	if label, ok := ns.Labels[pgv1.AdmissionLabel]; ok {
		if p.mode, err = pgadmission.ParseMode(label); err != nil {
			p.mode = pgadmission.ModeWarn
		}
	}
	if u, err := ParseUnjudged(ns.Labels[pgv1.AdmissionUnjudgedLabel]); err == nil {
		p.unjudged = u
	}
	return p, nil
}

// mode is the namespace's mode (policy).
func (v *Validator) mode(ctx context.Context, namespace string) (pgadmission.Mode, error) {
	p, err := v.policy(ctx, namespace)
	return p.mode, err
}

// namespace reads a namespace from the cache, or from the API server when
// the cache has not heard of it.
func (v *Validator) namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	err := v.Namespaces.Get(ctx, client.ObjectKey{Name: name}, ns)
	if err == nil || !apierrors.IsNotFound(err) || v.LiveNamespaces == nil {
		if err != nil {
			return nil, fmt.Errorf("read namespace %s: %w", name, err)
		}
		return ns, nil
	}
	readCtx := ctx
	if v.Budget > 0 {
		var cancel context.CancelFunc
		readCtx, cancel = context.WithTimeout(ctx, v.Budget)
		defer cancel()
	}
	if err := v.LiveNamespaces.Get(readCtx, client.ObjectKey{Name: name}, ns); err != nil {
		return nil, fmt.Errorf("read namespace %s from the API server: %w", name, err)
	}
	return ns, nil
}

// unjudged answers a change the check could not judge: admitted with a
// warning that says so, or, in Deny where the namespace asks to refuse
// what cannot be judged, refused in the same words.
func (v *Validator) unjudged(ctx context.Context, req admission.Request, p namespacePolicy, warnOnly bool, why error) admission.Response {
	log := logf.FromContext(ctx).WithValues("kind", kindLabel(req), "namespace", req.Namespace, "name", req.Name, "reason", why.Error())
	if p.mode == pgadmission.ModeDeny && p.unjudged == UnjudgedRefuse && !warnOnly {
		log.Info("Refused a change that was not judged")
		return deny([]string{pgadmission.ClipWarning(fmt.Sprintf("the change was not judged (%v), and namespace %s refuses what is not judged (%s: %s): try again, or ask kubectl placement lint why",
			why, req.Namespace, pgv1.AdmissionUnjudgedLabel, UnjudgedRefuse))})
	}
	log.Info("Admitted a change that was not judged")
	return admission.Allowed("").WithWarnings(fmt.Sprintf("placement-guard: the change was not judged (%v); kubectl placement lint judges it offline", why))
}
