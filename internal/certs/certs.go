// Package certs keeps the admission webhook's serving certificate: a
// private certificate authority the API server is told to trust and a
// serving certificate it signs, renewed well before they expire.
//
// Renewal never leaves a moment when the API server distrusts what the
// webhook serves. A serving certificate is renewed under the same
// authority, which the API server already trusts. An authority is renewed
// in two steps: the new one joins the bundle of trusted authorities (the
// old ones stay until they expire), and only once the API server has been
// given that bundle is a serving certificate issued by it.
//
// The bundle the API server is given is never narrowed to what the Secret
// holds now (TrustBundle): an authority a person replaced, restored from a
// backup or deleted with the Secret may still have signed what a replica
// serves, so every authority still valid stays trusted until it expires.
//
// Everything here is pure: keys in, keys out, the time given.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"
)

// The keys of the Secret the certificates are kept in: those of a
// kubernetes.io/tls Secret, and cert-manager's ca.crt, plus the
// authority's key.
const (
	KeyBundle = "ca.crt"
	KeyCAKey  = "ca.key"
	KeyCert   = "tls.crt"
	KeyKey    = "tls.key"
)

// The PEM block types written and read.
const (
	pemCertificate = "CERTIFICATE"
	pemECKey       = "EC PRIVATE KEY"
)

// AuthorityLifetimes is how many serving certificates' lifetimes an
// authority lives: renewing it is the rarer, two-step change.
const AuthorityLifetimes = 10

// MaxAuthorities bounds the authorities a bundle holds, the current one
// first and the newest of the others: an authority outlives many
// renewals, and a Secret that keeps losing its authority's key (restored
// by something that does not know the key) would otherwise add one at
// each loss until the webhook configurations grow too large to store.
// A replica serves what the current authority signs, or for a rollover's
// few seconds what the one before it signed: the others are kept only in
// case.
const MaxAuthorities = 4

// Keys are the PEM blocks of a Secret. Bundle holds every authority the
// API server should trust, the current one (whose key is CAKey) first.
type Keys struct {
	Bundle, CAKey, Cert, Key []byte
}

// FromData reads the keys of a Secret's data.
func FromData(data map[string][]byte) Keys {
	return Keys{Bundle: data[KeyBundle], CAKey: data[KeyCAKey], Cert: data[KeyCert], Key: data[KeyKey]}
}

// Data is the Secret's data holding the keys.
func (k Keys) Data() map[string][]byte {
	return map[string][]byte{KeyBundle: k.Bundle, KeyCAKey: k.CAKey, KeyCert: k.Cert, KeyKey: k.Key}
}

// New makes a fresh authority and a serving certificate for hosts, each
// serving certificate valid for validity.
func New(hosts []string, now time.Time, validity time.Duration) (Keys, error) {
	k, err := Keys{}.WithNewAuthority(now, validity)
	if err != nil {
		return Keys{}, err
	}
	return k.WithNewCert(hosts, now, validity)
}

// AuthorityRenewal says why the current authority must be replaced, ""
// when it need not: missing or unreadable, or in the last third of its
// life.
func (k Keys) AuthorityRenewal(now time.Time) string {
	ca, _, err := k.authority()
	if err != nil {
		return err.Error()
	}
	if lateInLife(ca, now) {
		return fmt.Sprintf("the authority expires at %s", ca.NotAfter.UTC().Format(time.RFC3339))
	}
	return ""
}

// CertRenewal says why the serving certificate must be reissued, "" when
// it need not: missing or unreadable, not for hosts, not signed by the
// current authority, not matching its key, or in the last third of its
// life.
func (k Keys) CertRenewal(hosts []string, now time.Time) string {
	ca, _, err := k.authority()
	if err != nil {
		return err.Error()
	}
	cert, err := firstCert(k.Cert)
	if err != nil {
		return "serving certificate: " + err.Error()
	}
	if _, err := tls.X509KeyPair(k.Cert, k.Key); err != nil {
		return "serving key: " + err.Error()
	}
	if err := cert.CheckSignatureFrom(ca); err != nil {
		return "the serving certificate is not signed by the current authority"
	}
	if !slices.Equal(hostsOf(cert), sortedHosts(hosts)) {
		return fmt.Sprintf("the serving certificate is for %v, not %v", hostsOf(cert), sortedHosts(hosts))
	}
	if lateInLife(cert, now) {
		return fmt.Sprintf("the serving certificate expires at %s", cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return ""
}

// WithNewAuthority makes a new authority the current one: first in the
// bundle, the authorities before it kept until they expire, so that what
// they signed stays trusted. The serving certificate is left as it is.
func (k Keys) WithNewAuthority(now time.Time, validity time.Duration) (Keys, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Keys{}, fmt.Errorf("authority key: %w", err)
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "placement-guard webhook authority " + now.UTC().Format(time.RFC3339)},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := sign(tmpl, tmpl, &key.PublicKey, key, now, AuthorityLifetimes*validity)
	if err != nil {
		return Keys{}, fmt.Errorf("authority: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Keys{}, err
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return Keys{}, err
	}
	k.Bundle, k.CAKey = bundleOf(ca, certsOf(k.Bundle), now), pem.EncodeToMemory(&pem.Block{Type: pemECKey, Bytes: keyDER})
	return k, nil
}

// WithNewCert issues a serving certificate for hosts (DNS names or IP
// addresses) signed by the current authority.
func (k Keys) WithNewCert(hosts []string, now time.Time, validity time.Duration) (Keys, error) {
	ca, caKey, err := k.authority()
	if err != nil {
		return Keys{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Keys{}, fmt.Errorf("serving key: %w", err)
	}
	tmpl := &x509.Certificate{
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range sortedHosts(hosts) {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	if len(hosts) > 0 {
		tmpl.Subject.CommonName = hosts[0]
	}
	der, err := sign(tmpl, ca, &key.PublicKey, caKey, now, validity)
	if err != nil {
		return Keys{}, fmt.Errorf("serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Keys{}, err
	}
	k.Cert = pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: der})
	k.Key = pem.EncodeToMemory(&pem.Block{Type: pemECKey, Bytes: keyDER})
	return k, nil
}

// Serving is the serving certificate and key for a TLS server.
func (k Keys) Serving() (*tls.Certificate, error) {
	c, err := tls.X509KeyPair(k.Cert, k.Key)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	return &c, nil
}

// Servable says whether the serving certificate can be served at now:
// readable, matching its key, and not expired.
func (k Keys) Servable(now time.Time) bool {
	cert, err := firstCert(k.Cert)
	if err != nil {
		return false
	}
	if _, err := tls.X509KeyPair(k.Cert, k.Key); err != nil {
		return false
	}
	return now.After(cert.NotBefore) && now.Before(cert.NotAfter)
}

// AuthorityLost reports keys whose authority cannot sign: its key is
// missing, unreadable or not the authority's. A lost authority is
// replaced; one merely late in its life is renewed.
func (k Keys) AuthorityLost() bool {
	_, _, err := k.authority()
	return err != nil
}

// CurrentAuthority is the fingerprint of the keys' current authority, ""
// when it cannot be read.
func (k Keys) CurrentAuthority() string {
	ca, _, err := k.authority()
	if err != nil {
		return ""
	}
	return Fingerprint(ca)
}

func leafOf(cert *tls.Certificate) (*x509.Certificate, error) {
	if cert == nil || len(cert.Certificate) == 0 {
		return nil, errors.New("no certificate")
	}
	if cert.Leaf != nil {
		return cert.Leaf, nil
	}
	return x509.ParseCertificate(cert.Certificate[0])
}

// authority is the current authority and its key.
func (k Keys) authority() (*x509.Certificate, *ecdsa.PrivateKey, error) {
	ca, err := firstCert(k.Bundle)
	if err != nil {
		return nil, nil, fmt.Errorf("authority: %w", err)
	}
	block, _ := pem.Decode(k.CAKey)
	if block == nil {
		return nil, nil, errors.New("authority key: missing")
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("authority key: %w", err)
	}
	if !key.PublicKey.Equal(ca.PublicKey) {
		return nil, nil, errors.New("authority key: does not match the authority")
	}
	return ca, key, nil
}

// sign issues tmpl, backdated a little for clocks behind ours.
func sign(tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, signer *ecdsa.PrivateKey, now time.Time, validity time.Duration) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-min(time.Hour, validity/10))
	tmpl.NotAfter = now.Add(validity)
	return x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
}

// lateInLife is true in the last third of a certificate's life, when it
// is renewed: a failing renewal then has that third to be noticed.
func lateInLife(c *x509.Certificate, now time.Time) bool {
	life := c.NotAfter.Sub(c.NotBefore)
	return c.NotAfter.Sub(now) < life/3
}

func firstCert(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != pemCertificate {
		return nil, errors.New("missing")
	}
	return x509.ParseCertificate(block.Bytes)
}

func hostsOf(c *x509.Certificate) []string {
	hosts := slices.Clone(c.DNSNames)
	for _, ip := range c.IPAddresses {
		hosts = append(hosts, ip.String())
	}
	slices.Sort(hosts)
	return slices.Compact(hosts)
}

func sortedHosts(hosts []string) []string {
	out := make([]string, 0, len(hosts))
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			h = ip.String()
		}
		out = append(out, h)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
