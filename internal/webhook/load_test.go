package webhook

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	pgadmission "github.com/placement-guard/placement-guard/internal/admission"
	"github.com/placement-guard/placement-guard/internal/certs"
)

// authority is a certificate authority of a test's, issuing client
// certificates.
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newAuthority(t *testing.T) authority {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return authority{cert: cert, key: key}
}

// client is a client certificate for name.
func (a authority) client(t *testing.T, name string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name}, NotBefore: a.cert.NotBefore, NotAfter: a.cert.NotAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// Where the API server is known by its client certificate, only its
// requests reach the check: anyone else (a pod that reaches the port,
// with no certificate, with one of another authority, or with one of
// another name) is answered at once and nothing of it is decoded.
func TestTheAPIServerIsKnownByItsCertificate(t *testing.T) {
	ca, stranger := newAuthority(t), newAuthority(t)
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	id := &APIServerIdentity{CAs: pool, Names: []string{"kube-apiserver-webhook-client"}}
	var seen []caller
	srv := httptest.NewUnstartedServer(withCaller(id, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, callerOf(r.Context()))
	})))
	keys, err := certs.New([]string{"127.0.0.1"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := tls.X509KeyPair(keys.Cert, keys.Key)
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serving}}
	id.TLS(srv.TLS)
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(keys.Bundle)
	post := func(cert *tls.Certificate) (int, error) {
		tc := &tls.Config{RootCAs: roots}
		if cert != nil {
			tc.Certificates = []tls.Certificate{*cert}
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
		resp, err := c.Post(srv.URL+Path, "application/json", strings.NewReader("{}"))
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	apiServer, otherName, otherCA := ca.client(t, "kube-apiserver-webhook-client"), ca.client(t, "admin"), stranger.client(t, "kube-apiserver-webhook-client")
	for _, c := range []struct {
		name string
		cert *tls.Certificate
		code int
	}{
		{"no certificate", nil, http.StatusForbidden},
		{"a certificate of the authority, of another name", &otherName, http.StatusForbidden},
		{"the API server's", &apiServer, http.StatusOK},
	} {
		code, err := post(c.cert)
		if err != nil || code != c.code {
			t.Errorf("%s: %d, %v; want %d", c.name, code, err, c.code)
		}
	}
	if _, err := post(&otherCA); err == nil {
		t.Error("a certificate of another authority was accepted")
	}
	if len(seen) != 1 || !seen[0].apiServer || seen[0].source != "127.0.0.1" {
		t.Fatalf("what reached the check: %+v; want the API server's request alone", seen)
	}

	// Without an identity every caller reaches the check, known by its
	// address.
	seen = nil
	open := httptest.NewServer(withCaller(nil, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { seen = append(seen, callerOf(r.Context())) })))
	defer open.Close()
	if resp, err := http.Post(open.URL, "application/json", strings.NewReader("{}")); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("without an identity: %v %v", resp, err)
	}
	if len(seen) != 1 || seen[0].apiServer || seen[0].source != "127.0.0.1" {
		t.Fatalf("without an identity the caller is its address: %+v", seen)
	}
}

// The API server's requests share the slots by the user that sent each
// write: one user's burst may take half of them, and another user's
// write is judged beside it.
func TestOneUserCannotTakeEverySlot(t *testing.T) {
	ctx := context.WithValue(context.Background(), callerKey{}, caller{apiServer: true, source: "10.0.0.1"})
	v, _ := validator(t, "Deny", pgadmission.ModeWarn)
	v.Judging = NewSlots(4)
	server := callerOf(ctx)
	for range 2 {
		if !v.Judging.take(server.holderFor("tenant-a")) {
			t.Fatal("a user may hold two of four slots")
		}
	}
	if resp := v.Handle(ctx, asUser(request(t, admissionv1.Update, web(), web(apart), "kubectl"), "tenant-a")); !strings.Contains(strings.Join(resp.Warnings, " "), "as many changes as it may at once") {
		t.Fatalf("a third slot for one user: %+v", resp)
	}
	if resp := v.Handle(ctx, asUser(request(t, admissionv1.Update, web(), web(apart), "kubectl"), "ci-bot")); resp.Allowed || !strings.Contains(resp.Result.Message, "RolloutDeadlock") {
		t.Fatalf("another user's write is judged, and refused in Deny: %+v", resp)
	}
}

// In Deny, a change the check could not judge is admitted with a warning,
// or refused where the namespace, or the operator, asks for it; a scale,
// which no mode refuses for its findings, is never refused unjudged
// either.
func TestDenyRefusesWhatItCouldNotJudgeWhereAsked(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name               string
		mode, unjudged     string
		operator           Unjudged
		busy, slow, scaled bool
		allowed            bool
	}{
		{"busy, Deny, the default", "Deny", "", "", true, false, false, true},
		{"busy, Deny, the namespace refuses", "Deny", "Refuse", "", true, false, false, false},
		{"over budget, Deny, the namespace refuses", "Deny", "Refuse", "", false, true, false, false},
		{"busy, Deny, the operator refuses", "Deny", "", UnjudgedRefuse, true, false, false, false},
		{"busy, Deny, the operator refuses, the namespace admits", "Deny", "Admit", UnjudgedRefuse, true, false, false, true},
		{"busy, Warn, the namespace refuses", "Warn", "Refuse", UnjudgedRefuse, true, false, false, true},
		{"busy, an autoscaler's scale in Deny, the namespace refuses", "Deny", "Refuse", "", true, false, true, true},
		{"a label that names nothing is the default", "Deny", "Refuze", "", true, false, false, true},
	} {
		v, cluster := validator(t, c.mode, pgadmission.ModeWarn)
		if c.unjudged != "" {
			v.Namespaces = namespaces(t, map[string]string{pgv1.AdmissionLabel: c.mode, pgv1.AdmissionUnjudgedLabel: c.unjudged})
		}
		v.Unjudged = c.operator
		v.Judging = NewSlots(1)
		if c.busy {
			v.Judging.take(holder{key: "addr:elsewhere"})
		}
		if c.slow {
			v.Budget, cluster.delay = 50*time.Millisecond, time.Second
		}
		req := request(t, admissionv1.Update, web(), web(apart), "kubectl")
		if c.scaled {
			cluster.workload = web(apart)
			req = asUser(scaleRequest(t, 2, 5), "system:serviceaccount:kube-system:horizontal-pod-autoscaler")
		}
		resp := v.Handle(ctx, req)
		said := resp.Result.Message + strings.Join(resp.Warnings, " ")
		if resp.Allowed != c.allowed || !strings.Contains(said, "not judged") {
			t.Errorf("%s: allowed %v, want %v, saying it was not judged: %q", c.name, resp.Allowed, c.allowed, said)
		}
		if !resp.Allowed && !strings.Contains(said, pgv1.AdmissionUnjudgedLabel+": Refuse") {
			t.Errorf("%s: the refusal does not say why: %q", c.name, said)
		}
	}
}

// A namespace the cache has not heard of (created in the same apply as
// its workloads) is judged in the mode its labels say, read from the API
// server; one the API server does not know either is judged in the
// default mode.
func TestANamespaceTheCacheHasNotHeardOfIsReadLive(t *testing.T) {
	ctx := context.Background()
	v, _ := validator(t, "", pgadmission.ModeWarn)
	v.Namespaces = namespaces(t, nil, "elsewhere")
	v.LiveNamespaces = namespaces(t, map[string]string{pgv1.AdmissionLabel: "Deny"})
	if resp := v.Handle(ctx, request(t, admissionv1.Update, web(), web(apart), "kubectl")); resp.Allowed {
		t.Fatalf("a Deny namespace the cache has not heard of: admitted %+v", resp)
	}
	v.LiveNamespaces = namespaces(t, nil, "elsewhere")
	if resp := v.Handle(ctx, request(t, admissionv1.Update, web(), web(apart), "kubectl")); !resp.Allowed || !strings.Contains(strings.Join(resp.Warnings, " "), "RolloutDeadlock") {
		t.Fatalf("a namespace no one knows: judged in the default mode, got %+v", resp)
	}
}

// namespaces is a reader of one namespace: shop with labels, or the one
// named.
func namespaces(t *testing.T, labels map[string]string, name ...string) client.Reader {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	n := "shop"
	if len(name) > 0 {
		n = name[0]
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: labels}}).Build()
}
