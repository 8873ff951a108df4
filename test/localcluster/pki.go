package localcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the certificate authority of one local cluster and the files it
// issued: the API server's serving certificate, the admin client
// certificate every component uses, and the service account signing key.
type pki struct {
	CACert, ServerCert, ServerKey, AdminCert, AdminKey, SAKey, SAPub string
	// WebhookClientCA signs the certificate the API server presents to
	// admission webhooks (WebhookClientCert, WebhookClientKey), of its
	// own so that no other client of the cluster holds one it signed.
	WebhookClientCA, WebhookClientCert, WebhookClientKey string

	caPEM, adminCertPEM, adminKeyPEM []byte
}

func newPKI(dir string) (*pki, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "placement-guard-local-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}

	p := &pki{
		CACert:     filepath.Join(dir, "ca.crt"),
		ServerCert: filepath.Join(dir, "apiserver.crt"),
		ServerKey:  filepath.Join(dir, "apiserver.key"),
		AdminCert:  filepath.Join(dir, "admin.crt"),
		AdminKey:   filepath.Join(dir, "admin.key"),
		SAKey:      filepath.Join(dir, "sa.key"),
		SAPub:      filepath.Join(dir, "sa.pub"),
	}
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	if err := os.WriteFile(p.CACert, p.caPEM, 0o600); err != nil {
		return nil, fmt.Errorf("write CA certificate: %w", err)
	}

	server := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if _, _, err := issue(server, caCert, caKey, p.ServerCert, p.ServerKey); err != nil {
		return nil, fmt.Errorf("issue API server certificate: %w", err)
	}
	// system:masters is bound to cluster-admin: the control plane components
	// and the tests all act as this one identity.
	admin := &x509.Certificate{
		SerialNumber: big.NewInt(3),
		Subject:      pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if p.adminCertPEM, p.adminKeyPEM, err = issue(admin, caCert, caKey, p.AdminCert, p.AdminKey); err != nil {
		return nil, fmt.Errorf("issue admin certificate: %w", err)
	}
	if err := p.webhookClient(dir, now); err != nil {
		return nil, err
	}
	if err := writeKeyPair(p.SAKey, p.SAPub); err != nil {
		return nil, fmt.Errorf("write service account key: %w", err)
	}
	return p, nil
}

// WebhookClientName is the common name of the certificate the API server
// presents to admission webhooks: how the admission check knows a request
// comes from the API server.
const WebhookClientName = "kube-apiserver-webhook-client"

// webhookClient makes the authority of the webhooks' client certificate
// and the certificate the API server presents with it.
func (p *pki) webhookClient(dir string, now time.Time) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate the webhook client CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "placement-guard-local-webhook-client-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("create the webhook client CA: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return err
	}
	p.WebhookClientCA = filepath.Join(dir, "webhook-client-ca.crt")
	p.WebhookClientCert = filepath.Join(dir, "webhook-client.crt")
	p.WebhookClientKey = filepath.Join(dir, "webhook-client.key")
	if err := os.WriteFile(p.WebhookClientCA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return err
	}
	client := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: WebhookClientName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if _, _, err := issue(client, ca, key, p.WebhookClientCert, p.WebhookClientKey); err != nil {
		return fmt.Errorf("issue the webhook client certificate: %w", err)
	}
	return nil
}

// issue signs tmpl with the CA and writes the certificate and its new key.
func issue(tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey, certPath, keyPath string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl.NotBefore = ca.NotBefore
	tmpl.NotAfter = ca.NotAfter
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	if err := os.WriteFile(certPath, certPEM, 0o600); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, os.WriteFile(keyPath, keyPEM, 0o600)
}

func writeKeyPair(privPath, pubPath string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(privPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o600)
}
