package certs

// The trust side of the keys: which authorities a webhook configuration's
// caBundle holds and should hold, and whether what a replica serves is
// accepted by it, as the API server checks it.

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"slices"
	"time"
)

// Trusts says whether bundle, a webhook configuration's caBundle, holds
// the current authority: a serving certificate it signs is then accepted.
func (k Keys) Trusts(bundle []byte) bool {
	ca, _, err := k.authority()
	if err != nil {
		return false
	}
	return slices.ContainsFunc(certsOf(bundle), ca.Equal)
}

// TrustBundle is the caBundle a webhook configuration holding trusted
// should hold: every authority of the keys' bundle and of trusted that is
// still valid at now, each once, the newest first. Nothing still valid is
// dropped, as a replica may serve a certificate it signed; what expired or
// cannot be read goes. The order depends on the authorities alone, so
// replicas that read the Secret at different times write the same bundle.
func (k Keys) TrustBundle(trusted []byte, now time.Time) []byte {
	current, _ := firstCert(k.Bundle)
	keep := valid(append(certsOf(k.Bundle), certsOf(trusted)...), now)
	slices.SortFunc(keep, func(a, b *x509.Certificate) int {
		if byAge := b.NotBefore.Compare(a.NotBefore); byAge != 0 {
			return byAge
		}
		return bytes.Compare(a.Raw, b.Raw)
	})
	if len(keep) > MaxAuthorities {
		// The keys' authority is kept whatever its age; the oldest of the
		// others go.
		if current != nil && !slices.ContainsFunc(keep[:MaxAuthorities], current.Equal) {
			keep = append(keep[:MaxAuthorities-1], current)
		}
		keep = keep[:MaxAuthorities]
	}
	var out []byte
	for _, c := range keep {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: c.Raw})...)
	}
	return out
}

// valid are the certificates still valid at now, each once, in order.
func valid(certs []*x509.Certificate, now time.Time) []*x509.Certificate {
	var out []*x509.Certificate
	for _, c := range certs {
		if now.Before(c.NotAfter) && !slices.ContainsFunc(out, c.Equal) {
			out = append(out, c)
		}
	}
	return out
}

// bundleOf is the bundle of the authority current, first, and of the
// newest of older that are still valid, MaxAuthorities in all.
func bundleOf(current *x509.Certificate, older []*x509.Certificate, now time.Time) []byte {
	keep := valid(older, now)
	slices.SortStableFunc(keep, func(a, b *x509.Certificate) int { return b.NotBefore.Compare(a.NotBefore) })
	out := pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: current.Raw})
	for _, c := range keep[:min(len(keep), MaxAuthorities-1)] {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: c.Raw})...)
	}
	return out
}

// Fingerprint names a certificate: the SHA-256 of its DER form, in hex.
func Fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

// Issuer is the fingerprint of the authority of bundle that signed the
// serving certificate cert; "" when none did.
func Issuer(cert *tls.Certificate, bundle []byte) string {
	leaf, err := leafOf(cert)
	if err != nil {
		return ""
	}
	for _, ca := range certsOf(bundle) {
		if leaf.CheckSignatureFrom(ca) == nil {
			return Fingerprint(ca)
		}
	}
	return ""
}

// TrustedBy says whether a TLS client trusting only bundle accepts cert
// for host at now, as the API server checks the webhook it calls.
func TrustedBy(cert *tls.Certificate, bundle []byte, host string, now time.Time) bool {
	leaf, err := leafOf(cert)
	if err != nil {
		return false
	}
	pool := x509.NewCertPool()
	for _, ca := range certsOf(bundle) {
		pool.AddCert(ca)
	}
	_, err = leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, CurrentTime: now})
	return err == nil
}

// Authorities are the fingerprints of the authorities in bundle.
func Authorities(bundle []byte) []string {
	var out []string
	for _, c := range certsOf(bundle) {
		out = append(out, Fingerprint(c))
	}
	return out
}

func certsOf(data []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return out
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil && block.Type == pemCertificate {
			out = append(out, c)
		}
	}
}
