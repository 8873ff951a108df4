package certs

import (
	"crypto/tls"
	"crypto/x509"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	t0    = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	year  = 365 * 24 * time.Hour
	hosts = []string{"placement-guard-webhook-service.placement-guard-system.svc", "127.0.0.1"}
)

func mustNew(t *testing.T) Keys {
	t.Helper()
	k, err := New(hosts, t0, year)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// verify checks the serving certificate as the API server would: against
// bundle, for host, at now.
func verify(t *testing.T, k Keys, bundle []byte, host string, now time.Time) error {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		t.Fatal("no authority in the bundle")
	}
	c, err := k.Serving()
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	_, err = leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, CurrentTime: now})
	return err
}

func TestNewKeysServeTheirHosts(t *testing.T) {
	k := mustNew(t)
	for _, h := range hosts {
		if err := verify(t, k, k.Bundle, h, t0.Add(time.Hour)); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
	if err := verify(t, k, k.Bundle, "other.svc", t0); err == nil {
		t.Error("a host the certificate is not for verified")
	}
	if r := k.CertRenewal(hosts, t0); r != "" {
		t.Errorf("fresh keys need renewal: %s", r)
	}
	if r := k.AuthorityRenewal(t0); r != "" {
		t.Errorf("fresh authority needs renewal: %s", r)
	}
	if !k.Trusts(k.Bundle) {
		t.Error("keys do not trust their own bundle")
	}
	if got := FromData(k.Data()); string(got.Cert) != string(k.Cert) || string(got.CAKey) != string(k.CAKey) {
		t.Error("keys do not survive a Secret's data")
	}
}

func TestCertRenewal(t *testing.T) {
	k := mustNew(t)
	other := mustNew(t)
	cases := []struct {
		name  string
		keys  Keys
		hosts []string
		at    time.Time
		want  string // a word of the reason; "" for none
	}{
		{"fresh", k, hosts, t0, ""},
		{"hosts in another order", k, []string{hosts[1], hosts[0], hosts[1]}, t0, ""},
		{"half its life", k, hosts, t0.Add(year / 2), ""},
		{"last third", k, hosts, t0.Add(year * 7 / 10), "expires"},
		{"expired", k, hosts, t0.Add(2 * year), "expires"},
		{"another host", k, []string{"x.svc"}, t0, "is for"},
		{"no certificate", Keys{Bundle: k.Bundle, CAKey: k.CAKey}, hosts, t0, "missing"},
		{"garbage key", Keys{Bundle: k.Bundle, CAKey: k.CAKey, Cert: k.Cert, Key: []byte("junk")}, hosts, t0, "serving key"},
		{"another authority's certificate", Keys{Bundle: k.Bundle, CAKey: k.CAKey, Cert: other.Cert, Key: other.Key}, hosts, t0, "not signed"},
		{"authority key of another", Keys{Bundle: k.Bundle, CAKey: other.CAKey, Cert: k.Cert, Key: k.Key}, hosts, t0, "does not match"},
		{"empty", Keys{}, hosts, t0, "missing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.keys.CertRenewal(tc.hosts, tc.at)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("CertRenewal = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRenewedCertKeepsTheAuthority(t *testing.T) {
	k := mustNew(t)
	at := t0.Add(year * 7 / 10)
	renewed, err := k.WithNewCert(hosts, at, year)
	if err != nil {
		t.Fatal(err)
	}
	if string(renewed.Bundle) != string(k.Bundle) {
		t.Fatal("renewing the serving certificate changed the bundle")
	}
	// The bundle the API server already holds accepts the new certificate.
	if err := verify(t, renewed, k.Bundle, hosts[0], at); err != nil {
		t.Fatal(err)
	}
	if r := renewed.CertRenewal(hosts, at); r != "" {
		t.Fatalf("renewed certificate needs renewal: %s", r)
	}
}

// TestAuthorityRenewalInTwoSteps: the new authority joins the bundle while
// the old serving certificate is still served, and the certificate it
// signs is accepted by the new bundle only.
func TestAuthorityRenewalInTwoSteps(t *testing.T) {
	k := mustNew(t)
	at := t0.Add(AuthorityLifetimes * year * 7 / 10)
	// The serving certificate was renewed under the old authority lately.
	k, err := k.WithNewCert(hosts, at.Add(-time.Hour), year)
	if err != nil {
		t.Fatal(err)
	}
	if r := k.AuthorityRenewal(at); !strings.Contains(r, "expires") {
		t.Fatalf("AuthorityRenewal = %q late in its life", r)
	}
	step1, err := k.WithNewAuthority(at, year)
	if err != nil {
		t.Fatal(err)
	}
	if r := step1.AuthorityRenewal(at); r != "" {
		t.Fatalf("new authority needs renewal: %s", r)
	}
	if k.Trusts(step1.Bundle) != true {
		t.Error("the new bundle dropped the old authority, which the served certificate needs")
	}
	if step1.Trusts(k.Bundle) {
		t.Error("the old bundle trusts the new authority")
	}
	// Step 1 leaves the served certificate alone: still valid under the new bundle.
	if err := verify(t, step1, step1.Bundle, hosts[0], at); err != nil {
		t.Errorf("the old certificate under the new bundle: %v", err)
	}
	if r := step1.CertRenewal(hosts, at); !strings.Contains(r, "not signed") {
		t.Fatalf("CertRenewal after a new authority = %q", r)
	}
	step2, err := step1.WithNewCert(hosts, at, year)
	if err != nil {
		t.Fatal(err)
	}
	if err := verify(t, step2, step1.Bundle, hosts[0], at); err != nil {
		t.Errorf("the new certificate under the new bundle: %v", err)
	}
	if err := verify(t, step2, k.Bundle, hosts[0], at); err == nil {
		t.Error("the new certificate verified under the old bundle alone")
	}
	// Once the old authority expires, the next renewal drops it.
	later := t0.Add(AuthorityLifetimes*year + time.Hour)
	step3, err := step2.WithNewAuthority(later, year)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(certsOf(step3.Bundle)); n != 2 {
		t.Errorf("bundle holds %d authorities, want the new and the one before (the first expired)", n)
	}
}

func TestServingCertificateLoadsIntoTLS(t *testing.T) {
	k := mustNew(t)
	c, err := k.Serving()
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{*c}}
	if len(cfg.Certificates[0].Certificate) != 1 {
		t.Fatal("want the leaf alone")
	}
	if _, err := (Keys{Cert: []byte("x"), Key: []byte("y")}).Serving(); err == nil {
		t.Fatal("garbage loaded")
	}
}

func TestServable(t *testing.T) {
	k := mustNew(t)
	for _, tc := range []struct {
		name string
		keys Keys
		at   time.Time
		want bool
	}{
		{"fresh", k, t0, true},
		{"late in life", k, t0.Add(year * 9 / 10), true},
		{"expired", k, t0.Add(year + time.Hour), false},
		{"not yet valid", k, t0.Add(-24 * time.Hour), false},
		{"garbage", Keys{Cert: []byte("junk"), Key: k.Key}, t0, false},
		{"key of another", Keys{Cert: k.Cert, Key: mustNew(t).Key}, t0, false},
	} {
		if got := tc.keys.Servable(tc.at); got != tc.want {
			t.Errorf("%s: Servable = %v", tc.name, got)
		}
	}
}

// TestTrustBundleKeepsWhatMayBeServed: the bundle given to the API server
// is the union of the Secret's authorities and those it trusts already,
// each once; what expired or cannot be read goes; two replicas that read
// the Secret in different orders write the same bytes.
func TestTrustBundleKeepsWhatMayBeServed(t *testing.T) {
	a := mustNew(t)
	b, err := New(hosts, t0.Add(time.Hour), year)
	if err != nil {
		t.Fatal(err)
	}
	// An authority valid for a day only, which has expired by the end.
	short, err := Keys{}.WithNewAuthority(t0, 24*time.Hour/AuthorityLifetimes)
	if err != nil {
		t.Fatal(err)
	}
	garbage := []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
	now := t0.Add(2 * time.Hour)

	union := b.TrustBundle(append(append(append([]byte{}, a.Bundle...), garbage...), short.Bundle...), now)
	got := Authorities(union)
	if len(got) != 3 || got[0] != Authorities(b.Bundle)[0] || !slices.Contains(got, Authorities(a.Bundle)[0]) || !slices.Contains(got, Authorities(short.Bundle)[0]) {
		t.Fatalf("union %v, want the three valid authorities, the newest first", got)
	}
	if err := verify(t, a, union, hosts[0], now); err != nil {
		t.Fatalf("a certificate of the replaced authority is no longer trusted: %v", err)
	}
	if err := verify(t, b, union, hosts[0], now); err != nil {
		t.Fatalf("a certificate of the Secret's authority is not trusted: %v", err)
	}
	if other := a.TrustBundle(b.Bundle, now); string(other) != string(b.TrustBundle(a.Bundle, now)) {
		t.Fatal("the bundle depends on which replica wrote it")
	}
	later := t0.Add(48 * time.Hour)
	if got := Authorities(b.TrustBundle(union, later)); slices.Equal(got, Authorities(union)) || len(got) != 2 {
		t.Fatalf("after the short authority expired the bundle holds %d, want 2", len(got))
	}
	if again := b.TrustBundle(union, now); string(again) != string(union) {
		t.Fatal("the bundle changes when nothing changed")
	}
	served, err := a.Serving()
	if err != nil {
		t.Fatal(err)
	}
	if Issuer(served, union) != Authorities(a.Bundle)[0] || Issuer(served, b.Bundle) != "" {
		t.Fatal("Issuer does not name the authority that signed the certificate")
	}
	if !TrustedBy(served, union, hosts[0], now) || TrustedBy(served, b.Bundle, hosts[0], now) {
		t.Fatal("TrustedBy does not verify as a TLS client")
	}
}

// However many authorities a configuration or the Secret came to hold,
// a bundle holds MaxAuthorities of them: the keys' own authority,
// whatever its age, and the newest of the others.
func TestBundlesHoldAtMostMaxAuthorities(t *testing.T) {
	now := time.Now()
	old, err := New([]string{"h"}, now.Add(-time.Hour), time.Hour*24)
	if err != nil {
		t.Fatal(err)
	}
	var trusted []byte
	k := old
	for i := range 2 * MaxAuthorities {
		if k, err = k.WithNewAuthority(now.Add(time.Duration(i)*time.Minute), 24*time.Hour); err != nil {
			t.Fatal(err)
		}
		trusted = append(trusted, k.Bundle...)
		if n := len(Authorities(k.Bundle)); n > MaxAuthorities {
			t.Fatalf("after %d new authorities the Secret's bundle holds %d", i+1, n)
		}
	}
	bundle := old.TrustBundle(trusted, now.Add(time.Hour))
	got := Authorities(bundle)
	if len(got) != MaxAuthorities {
		t.Fatalf("the configuration's bundle holds %d authorities, want %d", len(got), MaxAuthorities)
	}
	if !slices.Contains(got, Authorities(old.Bundle)[0]) {
		t.Fatal("the keys' own authority, the oldest, was dropped")
	}
	newest := Authorities(k.Bundle)[0]
	if !slices.Contains(got, newest) {
		t.Fatal("the newest authority was dropped")
	}
}
