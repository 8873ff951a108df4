package webhook

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/placement-guard/placement-guard/internal/certs"
)

const rotatorHost = "placement-guard-webhook-service.pg-system.svc"

// apiServer starts a real API server (envtest): the rotator's writes race
// and conflict there as they do in a cluster.
func apiServer(t *testing.T) client.Client {
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
	c, err := client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme})
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

func rotator(c client.Client, clk *clock, secret string) *CertRotator {
	return &CertRotator{Client: c, Secret: types.NamespacedName{Namespace: "pg-system", Name: secret}, Configuration: "pg-" + secret,
		Hosts: []string{rotatorHost}, Validity: DefaultCertValidity, Now: clk.Now, Log: logr.Discard()}
}

// settle syncs until a sync finds nothing to do, as Start would.
func settle(t *testing.T, r *CertRotator) {
	t.Helper()
	for range 10 {
		err := r.Sync(context.Background())
		if err == nil {
			return
		}
		if !errors.Is(err, errRaced) {
			t.Fatal(err)
		}
	}
	t.Fatal("the rotator did not settle in 10 syncs")
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

func configVersion(t *testing.T, c client.Client, r *CertRotator) string {
	t.Helper()
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: r.Configuration}, cfg); err != nil {
		t.Fatal(err)
	}
	return cfg.ResourceVersion
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
		settle(t, r)
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
		settle(t, r)
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
			settle(t, r)
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
		settle(t, r)
		before, bundle := served(t, c, r), secretKeys(t, c, r).Bundle
		clk.Add(DefaultCertValidity * 7 / 10)
		settle(t, r)
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
		settle(t, r)
		// Time passes, a serving certificate at a time: each renewal keeps
		// it valid. After a sync tells the configuration something new,
		// what is served changes only after a sync that ends in a wait
		// (not in an immediate retry): the API server's informer takes the
		// change in meanwhile.
		for range certs.AuthorityLifetimes * 3 {
			clk.Add(DefaultCertValidity * 7 / 30)
			held := ""
			for range 10 {
				before, told := served(t, c, r), configVersion(t, c, r)
				err := r.Sync(ctx)
				if configVersion(t, c, r) != told {
					held = before
				}
				if held != "" && served(t, c, r) != held {
					t.Fatal("a certificate of the new authority was served without a wait after the configuration was told")
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
		settle(t, r)
		s := &corev1.Secret{}
		if err := c.Get(ctx, r.Secret, s); err != nil {
			t.Fatal(err)
		}
		s.Data = map[string][]byte{certs.KeyCert: []byte("junk"), certs.KeyBundle: []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")}
		if err := c.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
		// Nothing servable is left to wait with: the certificate is issued at once.
		settle(t, r)
		served(t, c, r)
	})

	t.Run("a configuration re-created without a caBundle is told again", func(t *testing.T) {
		clk := &clock{now: time.Now()}
		r := rotator(c, clk, "recreated")
		settle(t, r) // no configuration yet: the certificate is made all the same
		if _, err := r.GetCertificate(nil); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, configuration(r.Configuration)); err != nil {
			t.Fatal(err)
		}
		settle(t, r)
		served(t, c, r)
	})
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
