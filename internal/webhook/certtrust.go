package webhook

import (
	"bytes"
	"context"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/certs"
)

// trust gives every webhook of the configurations the bundle of every
// authority still valid, the keys' and those already there, and returns
// the bundle each installed configuration holds now (none for a
// configuration that does not exist: it calls nothing).
func (r *CertRotator) trust(ctx context.Context, keys certs.Keys, now time.Time) ([][]byte, error) {
	var out [][]byte
	for _, cfg := range r.configurations() {
		bundle, installed, err := r.trustIn(ctx, cfg, keys, now)
		if err != nil {
			return nil, err
		}
		if installed {
			out = append(out, bundle)
		}
	}
	return out, nil
}

// configurations are the webhook configurations that call the manager:
// the check's, and Adopt mode's.
func (r *CertRotator) configurations() []client.Object {
	var out []client.Object
	if r.Configuration != "" {
		out = append(out, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: r.Configuration}})
	}
	if r.MutatingConfiguration != "" {
		out = append(out, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: r.MutatingConfiguration}})
	}
	return out
}

// trustIn gives every webhook of one configuration the trust bundle of
// the keys and of what its webhooks trust now, and returns the bundle
// every webhook of it trusts once written; installed is false for a
// configuration that does not exist.
func (r *CertRotator) trustIn(ctx context.Context, cfg client.Object, keys certs.Keys, now time.Time) (bundle []byte, installed bool, err error) {
	kind := "ValidatingWebhookConfiguration"
	if _, mutating := cfg.(*admissionregistrationv1.MutatingWebhookConfiguration); mutating {
		kind = "MutatingWebhookConfiguration"
	}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); apierrors.IsNotFound(err) {
		return nil, false, nil
	} else if err != nil {
		return nil, false, fmt.Errorf("read %s %s: %w", kind, cfg.GetName(), err)
	}
	// What any webhook of it trusts now is kept: a replica may serve what
	// it signed. Each webhook is then given the same bundle.
	var trusted []byte
	for _, cc := range clientConfigsOf(cfg) {
		trusted = append(trusted, cc.CABundle...)
	}
	bundle = keys.TrustBundle(trusted, now)
	changed := false
	for _, cc := range clientConfigsOf(cfg) {
		if !bytes.Equal(cc.CABundle, bundle) {
			cc.CABundle = bundle
			changed = true
		}
	}
	if !changed {
		return bundle, true, nil
	}
	if err := r.Client.Update(ctx, cfg); apierrors.IsConflict(err) {
		return nil, false, errRaced
	} else if err != nil {
		return nil, false, fmt.Errorf("update %s %s: %w", kind, cfg.GetName(), err)
	}
	r.Log.Info("Gave the webhook configuration the certificate authorities", "kind", kind, "configuration", cfg.GetName(),
		"authorities", len(certs.Authorities(bundle)))
	return bundle, true, nil
}

// clientConfigsOf are the client configurations of a configuration's
// webhooks, to write in place.
func clientConfigsOf(cfg client.Object) []*admissionregistrationv1.WebhookClientConfig {
	var out []*admissionregistrationv1.WebhookClientConfig
	switch c := cfg.(type) {
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for i := range c.Webhooks {
			out = append(out, &c.Webhooks[i].ClientConfig)
		}
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for i := range c.Webhooks {
			out = append(out, &c.Webhooks[i].ClientConfig)
		}
	}
	return out
}
