package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/certs"
)

// CertRotator keeps the check's serving certificate in a Secret, every
// authority that may have signed what a replica serves in the webhook
// configurations' caBundle, and the certificate in memory for the TLS
// server. Every replica runs one, leader or not, as every replica serves
// the check: the Secret, written with optimistic locking, is what they
// agree on, and each watches it and the configurations, so that a change
// by a person, a restore or another replica is taken in within seconds.
//
// What a replica serves is always trusted by the configurations as they
// stand: an authority is added to caBundle beside the others, never in
// their place (certs.Keys.TrustBundle), and a certificate it signs is
// issued and served only once it has been in every configuration for
// Settle, the time the API servers take to load a configuration.
type CertRotator struct {
	// Client reads, writes and watches the Secret and the configurations
	// directly: no cache, and no leader's fence.
	Client        client.WithWatch
	Secret        types.NamespacedName
	Configuration string
	// MutatingConfiguration is Adopt mode's webhook configuration, whose
	// caBundle is kept as Configuration's.
	MutatingConfiguration string
	Hosts                 []string
	// Validity is a serving certificate's life; an authority lives
	// certs.AuthorityLifetimes of them. Each is renewed in its last third.
	Validity time.Duration
	// Settle is how long an authority must have been in every
	// configuration before a certificate it signs is issued or served;
	// DefaultTrustSettle when zero.
	Settle time.Duration
	Now    func() time.Time
	Log    logr.Logger
	// Recorder, when set, says on the Secret why the rotator backs off.
	Recorder events.EventRecorder

	serving atomic.Pointer[tls.Certificate]

	mu sync.Mutex
	// trustedSince is when each authority (by fingerprint) was first seen
	// in every configuration, by this replica.
	trustedSince map[string]time.Time
	// lost are when this replica replaced an authority the Secret had
	// lost, within the last LostAuthorityWindow; saidUntil is until when
	// the back-off they caused has been told.
	lost      []time.Time
	saidUntil time.Time
}

// A Secret restored without its authority's key (a GitOps tool that heals
// it to a manifest, an external secret store) makes the rotator replace
// the authority, and every replacement is one more authority in the
// webhook configurations until the bundle's bound drops the oldest. At
// most MaxLostAuthorities replacements are made within
// LostAuthorityWindow: past that the rotator keeps serving what it holds,
// which the configurations still trust, and says why in an Event.
const (
	MaxLostAuthorities  = 3
	LostAuthorityWindow = time.Hour
)

// ReasonAuthorityLost is the reason of the Event said when the rotator
// backs off from a Secret that keeps losing its authority's key.
const ReasonAuthorityLost = "CertificateAuthorityLost"

// DefaultCertValidity is a serving certificate's life: a year.
const DefaultCertValidity = 365 * 24 * time.Hour

// DefaultTrustSettle is how long an authority waits in the configurations
// before a certificate it signs is served: an API server's informer takes
// a configuration in within a second or two.
const DefaultTrustSettle = 5 * time.Second

// errRaced is a write another replica won, or a write of our own whose
// result is read back: read again at once.
var errRaced = errors.New("another replica wrote the certificate first")

// settlingError is a step that waits: for an authority to settle in the
// configurations, or out a back-off from a Secret that keeps losing its
// authority. Sync again after the time left.
type settlingError struct{ after time.Duration }

func (e settlingError) Error() string {
	return fmt.Sprintf("waiting %s for the API server to take in the certificate authorities", e.after)
}

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

// Start syncs at once, again whenever the Secret or a configuration
// changes, and otherwise a tenth of a certificate's life apart (at most
// every ten minutes); sooner after a failure, a lost race or while an
// authority settles.
func (r *CertRotator) Start(ctx context.Context) error {
	period := min(max(r.Validity/10, time.Second), 10*time.Minute)
	changed := make(chan struct{}, 1)
	for _, w := range r.watched() {
		go r.watch(ctx, w, changed)
	}
	for {
		wait := period
		var settling settlingError
		switch err := r.Sync(ctx); {
		case errors.Is(err, errRaced):
			wait = 0
		case errors.As(err, &settling):
			wait = settling.after
		case err != nil:
			r.Log.Error(err, "Unable to keep the webhook's serving certificate", "secret", r.Secret)
			wait = min(period, 5*time.Second)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-time.After(wait):
		}
	}
}

// Sync takes one step toward keys that need no renewal, whose authorities
// every configuration trusts, and serves them. It returns errRaced when
// the next step is due at once, a settlingError when it waits for the API
// server, and nil when nothing is left to do.
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
		if keys.AuthorityLost() {
			if wait := r.backOff(secret, why, now); wait > 0 {
				return settlingError{after: wait}
			}
		}
		r.Log.Info("Renewing the webhook's certificate authority", "reason", why)
		if keys, err = keys.WithNewAuthority(now, r.Validity); err != nil {
			return err
		}
		return r.update(ctx, secret, keys)
	}
	bundles, err := r.trust(ctx, keys, now)
	if err != nil {
		return err
	}
	r.noteTrusted(bundles, now)
	// A certificate of a new authority waits until the API servers have
	// taken in a bundle that holds it; unless what the Secret holds cannot
	// be served, or is no longer trusted, when nothing better can be
	// served meanwhile.
	if why := keys.CertRenewal(r.Hosts, now); why != "" {
		if wait := r.untilSettled(keys.CurrentAuthority(), now); wait > 0 && r.servableAndTrusted(keys, bundles, now) {
			// Meanwhile what the Secret holds is served where nothing
			// trusted is held: its authority is in the bundle too.
			var settling settlingError
			if err := r.serve(keys, bundles, now); err != nil && !errors.As(err, &settling) {
				return err
			}
			return settlingError{after: wait}
		}
		r.Log.Info("Renewing the webhook's serving certificate", "reason", why)
		if keys, err = keys.WithNewCert(r.Hosts, now, r.Validity); err != nil {
			return err
		}
		return r.update(ctx, secret, keys)
	}
	return r.serve(keys, bundles, now)
}

// backOff says how long to wait before replacing the authority the
// Secret lost (why): 0 while fewer than MaxLostAuthorities were replaced
// within LostAuthorityWindow, and the loss is then counted; else until
// the oldest of them leaves the window, told once in an Event.
func (r *CertRotator) backOff(secret *corev1.Secret, why string, now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lost = slices.DeleteFunc(r.lost, func(t time.Time) bool { return now.Sub(t) >= LostAuthorityWindow })
	if len(r.lost) < MaxLostAuthorities {
		r.lost = append(r.lost, now)
		return 0
	}
	wait := r.lost[0].Add(LostAuthorityWindow).Sub(now)
	if now.Before(r.saidUntil) {
		return wait
	}
	r.saidUntil = now.Add(wait)
	msg := fmt.Sprintf("Secret %s lost its certificate authority (%s) %d times within %s: something restores it without ca.key (a GitOps self-heal, an external secret store). "+
		"No new authority is made for %s; the certificate served meanwhile stays trusted. Leave the Secret to the manager.",
		r.Secret, why, len(r.lost)+1, LostAuthorityWindow, wait.Round(time.Second))
	r.Log.Info("Backing off from a Secret that keeps losing its certificate authority", "secret", r.Secret, "wait", wait, "reason", why)
	if r.Recorder != nil {
		r.Recorder.Eventf(secret, nil, corev1.EventTypeWarning, ReasonAuthorityLost, "RenewAuthority", "%s", msg)
	}
	return wait
}

// serve holds the Secret's certificate for the TLS server once its
// authority has settled in the configurations. Until then the certificate
// held stays, as long as the configurations still trust it: one they no
// longer trust (its authority taken out by hand) is replaced at once.
func (r *CertRotator) serve(keys certs.Keys, bundles [][]byte, now time.Time) error {
	next, err := keys.Serving()
	if err != nil {
		return err
	}
	held := r.serving.Load()
	if held != nil && !bytes.Equal(held.Certificate[0], next.Certificate[0]) && r.trustedByAll(held, bundles, now) {
		if wait := r.untilSettled(certs.Issuer(next, keys.Bundle), now); wait > 0 {
			return settlingError{after: wait}
		}
	}
	if held == nil || !bytes.Equal(held.Certificate[0], next.Certificate[0]) {
		r.Log.Info("Serving the webhook's certificate from the Secret", "secret", r.Secret, "authority", certs.Issuer(next, keys.Bundle))
	}
	r.serving.Store(next)
	return nil
}

// servableAndTrusted reports whether the Secret's certificate can be
// served and every configuration trusts it.
func (r *CertRotator) servableAndTrusted(keys certs.Keys, bundles [][]byte, now time.Time) bool {
	if !keys.Servable(now) {
		return false
	}
	cert, err := keys.Serving()
	return err == nil && r.trustedByAll(cert, bundles, now)
}

// trustedByAll reports whether every configuration's bundle trusts cert
// for the first host; with no configuration nothing calls the check, and
// anything is as good.
func (r *CertRotator) trustedByAll(cert *tls.Certificate, bundles [][]byte, now time.Time) bool {
	for _, b := range bundles {
		if !certs.TrustedBy(cert, b, r.Hosts[0], now) {
			return false
		}
	}
	return true
}

// noteTrusted remembers when each authority was first seen in every
// configuration's bundle, and forgets those no longer in all of them.
func (r *CertRotator) noteTrusted(bundles [][]byte, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	inAll := map[string]bool{}
	for i, b := range bundles {
		here := certs.Authorities(b)
		for fp := range inAll {
			if !slices.Contains(here, fp) {
				delete(inAll, fp)
			}
		}
		if i == 0 {
			for _, fp := range here {
				inAll[fp] = true
			}
		}
	}
	if r.trustedSince == nil {
		r.trustedSince = map[string]time.Time{}
	}
	for fp := range r.trustedSince {
		if !inAll[fp] && len(bundles) > 0 {
			delete(r.trustedSince, fp)
		}
	}
	for fp := range inAll {
		if _, ok := r.trustedSince[fp]; !ok {
			r.trustedSince[fp] = now
		}
	}
}

// untilSettled is how long the authority fingerprint has yet to wait in
// every configuration before what it signs is served: 0 once it has
// settled, or when no configuration calls the check. An authority not in
// them all (it cannot be, after trust, but for a configuration edited
// meanwhile) waits a whole Settle from now.
func (r *CertRotator) untilSettled(fingerprint string, now time.Time) time.Duration {
	if len(r.configurations()) == 0 {
		return 0
	}
	settle := r.Settle
	if settle == 0 {
		settle = DefaultTrustSettle
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	since, ok := r.trustedSince[fingerprint]
	if !ok || fingerprint == "" {
		return settle
	}
	return max(0, settle-now.Sub(since))
}

// watched are the objects the rotator syncs again on a change of: its
// Secret and the configurations.
func (r *CertRotator) watched() []watchedObject {
	out := []watchedObject{{list: &corev1.SecretList{}, namespace: r.Secret.Namespace, name: r.Secret.Name}}
	if r.Configuration != "" {
		out = append(out, watchedObject{list: &admissionregistrationv1.ValidatingWebhookConfigurationList{}, name: r.Configuration})
	}
	if r.MutatingConfiguration != "" {
		out = append(out, watchedObject{list: &admissionregistrationv1.MutatingWebhookConfigurationList{}, name: r.MutatingConfiguration})
	}
	return out
}

// watchedObject is one object watched by name.
type watchedObject struct {
	list            client.ObjectList
	namespace, name string
}

// watch signals changed on every event of one object (a watch by name,
// which the rotator's rights by resource name allow), and again each time
// the watch is re-established, since events may have been missed between.
func (r *CertRotator) watch(ctx context.Context, w watchedObject, changed chan<- struct{}) {
	signal := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	backoff := time.Second
	for ctx.Err() == nil {
		opts := []client.ListOption{client.MatchingFields{"metadata.name": w.name}}
		if w.namespace != "" {
			opts = append(opts, client.InNamespace(w.namespace))
		}
		watcher, err := r.Client.Watch(ctx, w.list, opts...)
		if err != nil {
			r.Log.V(1).Info("Unable to watch; syncing on the period meanwhile", "name", w.name, "error", err.Error())
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		backoff = time.Second
		for range watcher.ResultChan() {
			signal()
		}
		watcher.Stop()
		signal()
		// A watch the API server ends at once (an error event) is not
		// re-established in a tight loop.
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
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
