package webhook

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/placement-guard/placement-guard/internal/certs"
)

const rotatorHost = "placement-guard-webhook-service.pg-system.svc"

// apiServer starts a real API server (envtest): the rotator's writes race
// and conflict there as they do in a cluster.
func apiServer(t *testing.T) client.WithWatch {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		if _, err := os.Stat(filepath.Join("..", "..", "bin", "kube-apiserver")); err != nil {
			t.Fatal("KUBEBUILDER_ASSETS is not set and bin/ has no kube-apiserver: run make test")
		}
		t.Setenv("KUBEBUILDER_ASSETS", filepath.Join("..", "..", "bin"))
	}
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pg-system"}}); err != nil {
		t.Fatal(err)
	}
	return c
}

func configuration(name string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	url := "https://" + rotatorHost + Path
	hook := func(n string) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{Name: n, ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
			SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
			FailurePolicy: ptr.To(admissionregistrationv1.Ignore)}
	}
	return &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{hook("a.placementguard.io"), hook("b.placementguard.io")}}
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func rotator(c client.WithWatch, clk *clock, secret string) *CertRotator {
	return &CertRotator{Client: c, Secret: types.NamespacedName{Namespace: "pg-system", Name: secret}, Configuration: "pg-" + secret,
		Hosts: []string{rotatorHost}, Validity: DefaultCertValidity, Now: clk.Now, Log: logr.Discard()}
}

// settle syncs until a sync finds nothing to do, as Start would, letting
// the clock run through the waits for an authority to settle.
func settle(t *testing.T, r *CertRotator, clk *clock) {
	t.Helper()
	for range 20 {
		err := r.Sync(context.Background())
		var settling settlingError
		switch {
		case err == nil:
			return
		case errors.As(err, &settling):
			clk.Add(settling.after)
		case !errors.Is(err, errRaced):
			t.Fatal(err)
		}
	}
	t.Fatal("the rotator did not settle in 20 syncs")
}

// served checks the rotator's certificate as the API server would: against
// the configuration's caBundle, for the host, at the clock's time; and
// returns its serial.
func served(t *testing.T, c client.Client, r *CertRotator) string {
	t.Helper()
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: r.Configuration}, cfg); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	for _, h := range cfg.Webhooks {
		if !pool.AppendCertsFromPEM(h.ClientConfig.CABundle) {
			t.Fatalf("webhook %s has no caBundle", h.Name)
		}
	}
	tc, err := r.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(tc.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: rotatorHost, CurrentTime: r.Now()}); err != nil {
		t.Fatalf("the API server would refuse the served certificate: %v", err)
	}
	return leaf.SerialNumber.String()
}

func secretKeys(t *testing.T, c client.Client, r *CertRotator) certs.Keys {
	t.Helper()
	s := &corev1.Secret{}
	if err := c.Get(context.Background(), r.Secret, s); err != nil {
		t.Fatal(err)
	}
	return certs.FromData(s.Data)
}

func TestCertRotator(t *testing.T) {
	c := apiServer(t)
	ctx := context.Background()

	t.Run("first start creates the Secret and tells the configuration", func(t *testing.T) {
		clk := &clock{now: time.Now()}
		r := rotator(c, clk, "first")
		if err := c.Create(ctx, configuration(r.Configuration)); err != nil {
			t.Fatal(err)
		}
		if r.Ready(nil) == nil {
			t.Fatal("ready before any certificate")
		}
		if _, err := r.GetCertificate(nil); err == nil {
			t.Fatal("a certificate before any sync")
		}
		settle(t, r, clk)
		served(t, c, r)
		if err := r.Ready(nil); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("Adopt mode's mutating configuration is told the same authority", func(t *testing.T) {
		clk := &clock{now: time.Now()}
		r := rotator(c, clk, "adopt")
		r.MutatingConfiguration = "pg-adopt-mutating"
		url := "https://" + rotatorHost + AdoptPath
		mutating := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: r.MutatingConfiguration},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "adopt.placementguard.io", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
				SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"}}}}
		if err := c.Create(ctx, configuration(r.Configuration)); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, mutating); err != nil {
			t.Fatal(err)
		}
		settle(t, r, clk)
		served(t, c, r)
		if err := c.Get(ctx, client.ObjectKeyFromObject(mutating), mutating); err != nil {
			t.Fatal(err)
		}
		if !secretKeys(t, c, r).Trusts(mutating.Webhooks[0].ClientConfig.CABundle) {
			t.Fatal("the mutating configuration's caBundle does not hold the authority")
		}
	})

	t.Run("replicas racing agree on one certificate", func(t *testing.T) {
		clk := &clock{now: time.Now()}
		rs := []*CertRotator{rotator(c, clk, "race"), rotator(c, clk, "race"), rotator(c, clk, "race")}
		if err := c.Create(ctx, configuration(rs[0].Configuration)); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for _, r := range rs {
			wg.Go(func() {
				for range 10 {
					if err := r.Sync(ctx); err == nil {
						return
					}
				}
			})
		}
		wg.Wait()
		want := served(t, c, rs[0])
		for _, r := range rs[1:] {
			settle(t, r, clk)
			if got := served(t, c, r); got != want {
				t.Fatalf("replicas serve certificates %s and %s", want, got)
			}
		}
	})

	t.Run("a serving certificate late in its life is renewed under the same authority", func(t *testing.T) {
		clk := &clock{now: time.Now()}
		r := rotator(c, clk, "renew")
		if err := c.Create(ctx, configuration(r.Configuration)); err != nil {
			t.Fatal(err)
		}
		settle(t, r, clk)
		before, bundle := served(t, c, r), secretKeys(t, c, r).Bundle
		clk.Add(DefaultCertValidity * 7 / 10)
		settle(t, r, clk)
		after := served(t, c, r)
		if after == before {
			t.Fatal("the certificate was not renewed in its last third")
		}
		if string(secretKeys(t, c, r).Bundle) != string(bundle) {
			t.Fatal("renewing the serving certificate changed the authority")
		}
	})

	t.Run("an authority late in its life is renewed in two steps", func(t *testing.T) {
		clk := &clock{now: time.Now()}
		r := rotator(c, clk, "authority")
		if err := c.Create(ctx, configuration(r.Configuration)); err != nil {
			t.Fatal(err)
		}
		settle(t, r, clk)
		// Time passes, a serving certificate at a time: each renewal keeps
		// it valid. A certificate of a new authority is served only once
		// that authority has been in the configuration for Settle: the API
		// server's informer takes the change in meanwhile.
		seen := map[string]time.Time{}
		for range certs.AuthorityLifetimes * 3 {
			clk.Add(DefaultCertValidity * 7 / 30)
			for range 20 {
				before := served(t, c, r)
				err := r.Sync(ctx)
				for _, fp := range certs.Authorities(caBundle(t, c, r)) {
					if _, ok := seen[fp]; !ok {
						seen[fp] = clk.Now()
					}
				}
				if served(t, c, r) != before {
					tc, _ := r.GetCertificate(nil)
					issuer := certs.Issuer(tc, caBundle(t, c, r))
					if clk.Now().Sub(seen[issuer]) < DefaultTrustSettle {
						t.Fatalf("a certificate of an authority %s in the configuration was served", clk.Now().Sub(seen[issuer]))
					}
				}
				var settling settlingError
				if errors.As(err, &settling) {
					clk.Add(settling.after)
					continue
				}
				if err == nil {
					break
				}
				if !errors.Is(err, errRaced) {
					t.Fatal(err)
				}
			}
		}
		if n := len(pemCerts(secretKeys(t, c, r).Bundle)); n < 2 {
			t.Fatalf("after 7 years the bundle holds %d authorities, want the new one beside the old", n)
		}
		// The certificate the new authority signs came one sync after the
		// configuration was told: at every step served() verified it.
		keys := secretKeys(t, c, r)
		if reason := keys.CertRenewal(r.Hosts, clk.Now()); reason != "" {
			t.Fatalf("settled keys need renewal: %s", reason)
		}
	})

	t.Run("a Secret edited into garbage is replaced", func(t *testing.T) {
		clk := &clock{now: time.Now()}
		r := rotator(c, clk, "garbage")
		if err := c.Create(ctx, configuration(r.Configuration)); err != nil {
			t.Fatal(err)
		}
		settle(t, r, clk)
		s := &corev1.Secret{}
		if err := c.Get(ctx, r.Secret, s); err != nil {
			t.Fatal(err)
		}
		s.Data = map[string][]byte{certs.KeyCert: []byte("junk"), certs.KeyBundle: []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")}
		if err := c.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
		// Nothing servable is left to wait with: the certificate is issued at once.
		settle(t, r, clk)
		served(t, c, r)
	})

	t.Run("a configuration re-created without a caBundle is told again", func(t *testing.T) {
		clk := &clock{now: time.Now()}
		r := rotator(c, clk, "recreated")
		settle(t, r, clk) // no configuration yet: the certificate is made all the same
		if _, err := r.GetCertificate(nil); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, configuration(r.Configuration)); err != nil {
			t.Fatal(err)
		}
		settle(t, r, clk)
		served(t, c, r)
	})
}

// caBundle is the configuration's caBundle, as its first webhook holds it.
func caBundle(t *testing.T, c client.Client, r *CertRotator) []byte {
	t.Helper()
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: r.Configuration}, cfg); err != nil {
		t.Fatal(err)
	}
	return cfg.Webhooks[0].ClientConfig.CABundle
}

// syncTrusted syncs until nothing is left to do without letting the clock
// run, and checks after every step that what each replica serves is
// trusted by the configuration: what the API server would accept while a
// change settles.
func syncTrusted(t *testing.T, c client.Client, clk *clock, rs ...*CertRotator) {
	t.Helper()
	for range 20 {
		done := true
		for _, r := range rs {
			err := r.Sync(context.Background())
			var settling settlingError
			if err != nil && !errors.Is(err, errRaced) && !errors.As(err, &settling) {
				t.Fatal(err)
			}
			done = done && err == nil
			for _, other := range rs {
				served(t, c, other)
			}
		}
		if done {
			return
		}
		clk.Add(time.Second)
	}
	t.Fatal("the rotators did not settle in 20 seconds of the clock")
}

// editSecret changes the rotator's Secret as a person or a restore would.
func editSecret(t *testing.T, c client.Client, r *CertRotator, edit func(map[string][]byte)) {
	t.Helper()
	s := &corev1.Secret{}
	if err := c.Get(context.Background(), r.Secret, s); err != nil {
		t.Fatal(err)
	}
	edit(s.Data)
	if err := c.Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

// The authority changes under the rotators' feet: by hand, from a backup,
// from one's own PKI, the Secret deleted, the configuration replaced. At
// every step what every replica serves stays trusted, and in the end all
// serve a certificate of the Secret's authority.
func TestCertRotatorKeepsWhatIsServedTrusted(t *testing.T) {
	c := apiServer(t)
	ctx := context.Background()
	start := func(t *testing.T, name string, replicas int) (*clock, []*CertRotator) {
		clk := &clock{now: time.Now()}
		var rs []*CertRotator
		for range replicas {
			rs = append(rs, rotator(c, clk, name))
		}
		if err := c.Create(ctx, configuration(rs[0].Configuration)); err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			settle(t, r, clk)
		}
		return clk, rs
	}
	// servesTheSecrets checks that every replica ends on the Secret's
	// certificate, signed by the Secret's current authority.
	servesTheSecrets := func(t *testing.T, rs []*CertRotator) {
		t.Helper()
		keys := secretKeys(t, c, rs[0])
		if why := keys.CertRenewal(rs[0].Hosts, rs[0].Now()); why != "" {
			t.Fatalf("the Secret's keys still need renewal: %s", why)
		}
		for _, r := range rs {
			held, _ := r.GetCertificate(nil)
			if string(held.Certificate[0]) != string(pemCerts(keys.Cert)[0].Raw) {
				t.Fatal("a replica does not serve the Secret's certificate")
			}
		}
	}
	other, err := certs.New([]string{"elsewhere"}, time.Now(), DefaultCertValidity)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("the authority replaced by hand, with its key", func(t *testing.T) {
		clk, rs := start(t, "by-hand", 2)
		editSecret(t, c, rs[0], func(d map[string][]byte) { d[certs.KeyBundle], d[certs.KeyCAKey] = other.Bundle, other.CAKey })
		syncTrusted(t, c, clk, rs...)
		servesTheSecrets(t, rs)
		if n := len(pemCerts(caBundle(t, c, rs[0]))); n != 2 {
			t.Fatalf("caBundle holds %d authorities, want the replaced one beside the new", n)
		}
	})

	t.Run("an authority from one's own PKI, without its key", func(t *testing.T) {
		clk, rs := start(t, "own-pki", 2)
		editSecret(t, c, rs[0], func(d map[string][]byte) { d[certs.KeyBundle] = other.Bundle; delete(d, certs.KeyCAKey) })
		syncTrusted(t, c, clk, rs...)
		servesTheSecrets(t, rs)
		if !slices.Contains(certs.Authorities(secretKeys(t, c, rs[0]).Bundle), certs.Authorities(other.Bundle)[0]) {
			t.Fatal("the Secret dropped the authority it was given")
		}
	})

	t.Run("the authority garbled", func(t *testing.T) {
		clk, rs := start(t, "garbled", 2)
		editSecret(t, c, rs[0], func(d map[string][]byte) {
			d[certs.KeyBundle] = []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
		})
		syncTrusted(t, c, clk, rs...)
		servesTheSecrets(t, rs)
	})

	t.Run("the Secret deleted under two replicas", func(t *testing.T) {
		clk, rs := start(t, "deleted", 2)
		if err := c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: rs[0].Secret.Namespace, Name: rs[0].Secret.Name}}); err != nil {
			t.Fatal(err)
		}
		syncTrusted(t, c, clk, rs...)
		servesTheSecrets(t, rs)
	})

	t.Run("the configuration replaced without a caBundle, or with garbage", func(t *testing.T) {
		clk, rs := start(t, "replaced", 1)
		for _, bundle := range [][]byte{nil, []byte("garbage")} {
			cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := c.Get(ctx, client.ObjectKey{Name: rs[0].Configuration}, cfg); err != nil {
				t.Fatal(err)
			}
			for i := range cfg.Webhooks {
				cfg.Webhooks[i].ClientConfig.CABundle = bundle
			}
			if err := c.Update(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			settle(t, rs[0], clk)
			served(t, c, rs[0])
		}
	})

	t.Run("an authority a person took out of both is not served a moment longer", func(t *testing.T) {
		_, rs := start(t, "revoked", 1)
		editSecret(t, c, rs[0], func(d map[string][]byte) { d[certs.KeyBundle], d[certs.KeyCAKey] = other.Bundle, other.CAKey })
		// One step: the new authority joins the bundle; the old one still
		// signs what is served.
		if err := rs[0].Sync(ctx); err == nil {
			t.Fatal("the step after a replaced authority has more to do")
		}
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := c.Get(ctx, client.ObjectKey{Name: rs[0].Configuration}, cfg); err != nil {
			t.Fatal(err)
		}
		for i := range cfg.Webhooks {
			cfg.Webhooks[i].ClientConfig.CABundle = other.Bundle
		}
		if err := c.Update(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		// Without the clock moving: nothing held is trusted, so the
		// Secret's certificate is issued and served at once.
		for range 5 {
			if err := rs[0].Sync(ctx); err == nil {
				break
			}
		}
		served(t, c, rs[0])
	})
}

// Start follows the Secret by watching it: an authority replaced by hand
// is served within seconds, not at the next ten-minute sync.
func TestCertRotatorFollowsTheSecret(t *testing.T) {
	c := apiServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &CertRotator{Client: c, Secret: types.NamespacedName{Namespace: "pg-system", Name: "watched"}, Configuration: "pg-watched",
		Hosts: []string{rotatorHost}, Validity: DefaultCertValidity, Settle: 200 * time.Millisecond, Now: time.Now, Log: logr.Discard()}
	if err := c.Create(ctx, configuration(r.Configuration)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Start(ctx) }()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("not within 30 s: %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("a certificate served", func() bool { return r.Ready(nil) == nil })
	other, err := certs.New([]string{"elsewhere"}, time.Now(), DefaultCertValidity)
	if err != nil {
		t.Fatal(err)
	}
	editSecret(t, c, r, func(d map[string][]byte) { d[certs.KeyBundle], d[certs.KeyCAKey] = other.Bundle, other.CAKey })
	waitFor("a certificate of the new authority served", func() bool {
		held, _ := r.GetCertificate(nil)
		return certs.Issuer(held, other.Bundle) != ""
	})
	served(t, c, r)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func pemCerts(bundle []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		if block, bundle = pem.Decode(bundle); block == nil {
			return out
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			out = append(out, c)
		}
	}
}

// A Secret restored again and again without its authority's key (a
// GitOps self-heal to a manifest that lacks ca.key) costs at most
// MaxLostAuthorities new authorities an hour: the rotator then backs off,
// says why in one Event on the Secret, and keeps serving what the
// configuration trusts. However often it is restored, the configuration
// holds no more than certs.MaxAuthorities authorities.
func TestCertRotatorBacksOffFromASecretThatKeepsLosingItsKey(t *testing.T) {
	c := apiServer(t)
	clk := &clock{now: time.Now()}
	r := rotator(c, clk, "restored")
	recorder := events.NewFakeRecorder(10)
	r.Recorder = recorder
	ctx := context.Background()
	if err := c.Create(ctx, configuration(r.Configuration)); err != nil {
		t.Fatal(err)
	}
	settle(t, r, clk)
	bundleSize := func() int {
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := c.Get(ctx, client.ObjectKey{Name: r.Configuration}, cfg); err != nil {
			t.Fatal(err)
		}
		return len(pemCerts(cfg.Webhooks[0].ClientConfig.CABundle))
	}
	backedOff := 0
	for restore := range 2 * MaxLostAuthorities {
		clk.Add(time.Minute)
		editSecret(t, c, r, func(d map[string][]byte) { delete(d, certs.KeyCAKey) })
		var waiting settlingError
		for range 20 {
			err := r.Sync(ctx)
			if errors.As(err, &waiting) && waiting.after > time.Minute {
				break // backing off
			}
			if err == nil {
				break
			}
			if errors.As(err, &waiting) {
				clk.Add(waiting.after)
			} else if !errors.Is(err, errRaced) {
				t.Fatal(err)
			}
		}
		if waiting.after > time.Minute {
			backedOff++
			if restore < MaxLostAuthorities {
				t.Fatalf("backed off at the %d. loss", restore+1)
			}
		}
		served(t, c, r)
		if n := bundleSize(); n > certs.MaxAuthorities {
			t.Fatalf("after %d restores the configuration holds %d authorities", restore+1, n)
		}
	}
	if backedOff != MaxLostAuthorities {
		t.Fatalf("backed off from %d of %d restores, want %d", backedOff, 2*MaxLostAuthorities, MaxLostAuthorities)
	}
	if got := len(recorder.Events); got != 1 {
		t.Fatalf("%d Events, want the back-off said once", got)
	}
	if e := <-recorder.Events; !strings.Contains(e, ReasonAuthorityLost) || !strings.Contains(e, "without ca.key") {
		t.Fatalf("the Event: %q", e)
	}

	// Once the hour has passed, a lost authority is replaced again.
	clk.Add(LostAuthorityWindow)
	settle(t, r, clk)
	if secretKeys(t, c, r).AuthorityLost() {
		t.Fatal("the authority was not replaced after the back-off")
	}
	served(t, c, r)
}
