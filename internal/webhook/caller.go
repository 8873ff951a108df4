package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"

	"github.com/placement-guard/placement-guard/internal/metrics"
)

// Who sent a review. The check's port answers whoever reaches it: a pod
// can send it reviews of its own making, and a judgement costs the
// snapshot that every change shares. The API server can be known by the
// client certificate it presents to webhooks (its admission
// configuration's kubeConfigFile, docs/operations.md); the check then
// judges the API server's requests only, and shares its slots among the
// users the API server says sent the writes. Without that, every caller
// is only a source address.

// APIServerIdentity says how the API server's requests are known: by a
// client certificate CAs signed, whose common name is one of Names (any,
// when Names is empty).
type APIServerIdentity struct {
	CAs   *x509.CertPool
	Names []string
}

// LoadAPIServerIdentity reads the authorities of caFile (PEM).
func LoadAPIServerIdentity(caFile string, names []string) (*APIServerIdentity, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("read the API server's client authority: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("read the API server's client authority: %s holds no PEM certificate", caFile)
	}
	return &APIServerIdentity{CAs: pool, Names: names}, nil
}

// TLS asks every caller for a client certificate and verifies one that is
// given; a caller without one is still served, as someone other than the
// API server.
func (id *APIServerIdentity) TLS(c *tls.Config) {
	c.ClientAuth = tls.VerifyClientCertIfGiven
	c.ClientCAs = id.CAs
}

// knows reports a connection whose verified client certificate is the API
// server's.
func (id *APIServerIdentity) knows(state *tls.ConnectionState) bool {
	if state == nil || len(state.VerifiedChains) == 0 || len(state.VerifiedChains[0]) == 0 {
		return false
	}
	return len(id.Names) == 0 || slices.Contains(id.Names, state.VerifiedChains[0][0].Subject.CommonName)
}

// caller is who sent a review.
type caller struct {
	// apiServer is set when the API server is known by its certificate
	// and sent it.
	apiServer bool
	// source is the address it came from (its host, without the port).
	source string
}

// holderFor is whom a judgement's slot is taken for: the user the API
// server says sent the write, when the API server is known to have sent
// it; else the source address, since anyone can write any user into a
// review.
func (c caller) holderFor(user string) holder {
	if c.apiServer {
		return holder{key: "user:" + user, user: true}
	}
	return holder{key: "addr:" + c.source}
}

type callerKey struct{}

// errNotAPIServer answers a caller that is not the API server, where the
// API server is known by its certificate.
var errNotAPIServer = errors.New("placement-guard judges the API server's requests only")

// withCaller puts who sent a request in its context, for the judgement's
// slot. Where id knows the API server, a request from anyone else is
// answered at once and never decoded.
func withCaller(id *APIServerIdentity, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		c := caller{source: host}
		if id != nil {
			if c.apiServer = id.knows(r.TLS); !c.apiServer {
				metrics.CountUnjudged("caller")
				http.Error(w, errNotAPIServer.Error(), http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	})
}

// callerOf is the caller withCaller put in ctx; an unknown one when none.
func callerOf(ctx context.Context) caller {
	c, _ := ctx.Value(callerKey{}).(caller)
	return c
}
