package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/certs"
)

// CertRotator keeps the check's serving certificate in a Secret, the
// authority that signs it in the webhook configuration's caBundle, and
// the certificate in memory for the TLS server. Every replica runs one,
// leader or not, as every replica serves the check: the Secret, written
// with optimistic locking, is what they agree on.
type CertRotator struct {
	// Client reads and writes the Secret and the configuration directly:
	// no cache, and no leader's fence.
	Client        client.Client
	Secret        types.NamespacedName
	Configuration string
	// MutatingConfiguration is Adopt mode's webhook configuration, whose
	// caBundle is kept as Configuration's.
	MutatingConfiguration string
	Hosts                 []string
	// Validity is a serving certificate's life; an authority lives
	// certs.AuthorityLifetimes of them. Each is renewed in its last third.
	Validity time.Duration
	Now      func() time.Time
	Log      logr.Logger

	serving atomic.Pointer[tls.Certificate]
}

// DefaultCertValidity is a serving certificate's life: a year.
const DefaultCertValidity = 365 * 24 * time.Hour

// errRaced is a write another replica won: read again at once.
var errRaced = errors.New("another replica wrote the certificate first")

// GetCertificate gives the TLS server the certificate held now.
func (r *CertRotator) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := r.serving.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("no serving certificate yet")
}

// Ready fails until a certificate is held: readiness waits for it.
func (r *CertRotator) Ready(*http.Request) error {
	if r.serving.Load() == nil {
		return fmt.Errorf("no serving certificate from Secret %s yet", r.Secret)
	}
	return nil
}

// NeedLeaderElection is false: every replica serves the check.
func (r *CertRotator) NeedLeaderElection() bool { return false }

// Start syncs at once and then a tenth of a certificate's life apart (at
// most every ten minutes), sooner after a failure or a lost race.
func (r *CertRotator) Start(ctx context.Context) error {
	period := min(max(r.Validity/10, time.Second), 10*time.Minute)
	for {
		wait := period
		if err := r.Sync(ctx); errors.Is(err, errRaced) {
			wait = 0
		} else if err != nil {
			r.Log.Error(err, "Unable to keep the webhook's serving certificate", "secret", r.Secret)
			wait = min(period, 5*time.Second)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// Sync takes one step toward keys that need no renewal, trusted by the
// webhook configuration, and serves them.
func (r *CertRotator) Sync(ctx context.Context) error {
	now := r.Now()
	secret := &corev1.Secret{}
	err := r.Client.Get(ctx, r.Secret, secret)
	if apierrors.IsNotFound(err) {
		return r.create(ctx, now)
	}
	if err != nil {
		return fmt.Errorf("read Secret %s: %w", r.Secret, err)
	}
	keys := certs.FromData(secret.Data)
	if why := keys.AuthorityRenewal(now); why != "" {
		r.Log.Info("Renewing the webhook's certificate authority", "reason", why)
		if keys, err = keys.WithNewAuthority(now, r.Validity); err != nil {
			return err
		}
		return r.update(ctx, secret, keys)
	}
	trusted, err := r.trust(ctx, keys.Bundle)
	if err != nil {
		return err
	}
	// A certificate of a new authority waits until the API server has been
	// told to trust it, one sync before: its configuration informer takes
	// the change in meanwhile. Unless what is held cannot be served at all.
	if why := keys.CertRenewal(r.Hosts, now); why != "" && (trusted || !keys.Servable(now)) {
		r.Log.Info("Renewing the webhook's serving certificate", "reason", why)
		if keys, err = keys.WithNewCert(r.Hosts, now, r.Validity); err != nil {
			return err
		}
		return r.update(ctx, secret, keys)
	}
	serving, err := keys.Serving()
	if err != nil {
		return err
	}
	r.serving.Store(serving)
	return nil
}

func (r *CertRotator) create(ctx context.Context, now time.Time) error {
	keys, err := certs.New(r.Hosts, now, r.Validity)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: r.Secret.Name, Namespace: r.Secret.Namespace,
			Labels: map[string]string{"app.kubernetes.io/name": "placement-guard", "app.kubernetes.io/component": "webhook"}},
		Type: corev1.SecretTypeOpaque,
		Data: keys.Data(),
	}
	if err := r.Client.Create(ctx, secret); apierrors.IsAlreadyExists(err) {
		return errRaced
	} else if err != nil {
		return fmt.Errorf("create Secret %s: %w", r.Secret, err)
	}
	r.Log.Info("Created the webhook's serving certificate", "secret", r.Secret, "hosts", r.Hosts)
	return errRaced // read back what was written, as any replica would
}

// update writes keys over what was read: a conflict is another replica's
// rotation, which is read again.
func (r *CertRotator) update(ctx context.Context, secret *corev1.Secret, keys certs.Keys) error {
	secret.Data = keys.Data()
	if err := r.Client.Update(ctx, secret); apierrors.IsConflict(err) {
		return errRaced
	} else if err != nil {
		return fmt.Errorf("update Secret %s: %w", r.Secret, err)
	}
	return errRaced
}

// trust puts bundle in every webhook of the configurations and says
// whether it was there already. With no configuration nothing calls the
// check, and nothing needs telling: true.
func (r *CertRotator) trust(ctx context.Context, bundle []byte) (bool, error) {
	inPlace := true
	for _, cfg := range r.configurations() {
		there, err := r.trustIn(ctx, cfg, bundle)
		if err != nil {
			return false, err
		}
		inPlace = inPlace && there
	}
	return inPlace, nil
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

// trustIn puts bundle in every webhook of one configuration; one that does
// not exist is not installed, and calls nothing.
func (r *CertRotator) trustIn(ctx context.Context, cfg client.Object, bundle []byte) (bool, error) {
	kind := "ValidatingWebhookConfiguration"
	if _, mutating := cfg.(*admissionregistrationv1.MutatingWebhookConfiguration); mutating {
		kind = "MutatingWebhookConfiguration"
	}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); apierrors.IsNotFound(err) {
		return true, nil
	} else if err != nil {
		return false, fmt.Errorf("read %s %s: %w", kind, cfg.GetName(), err)
	}
	changed := false
	for _, cc := range clientConfigsOf(cfg) {
		if !bytes.Equal(cc.CABundle, bundle) {
			cc.CABundle = bundle
			changed = true
		}
	}
	if !changed {
		return true, nil
	}
	if err := r.Client.Update(ctx, cfg); apierrors.IsConflict(err) {
		return false, errRaced
	} else if err != nil {
		return false, fmt.Errorf("update %s %s: %w", kind, cfg.GetName(), err)
	}
	r.Log.Info("Gave the webhook configuration the certificate authorities", "kind", kind, "configuration", cfg.GetName())
	return false, nil
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
