// Package faultproxy is a reverse proxy on loopback between the operator
// and kube-apiserver that injects the faults of the fault matrix: by rule,
// it answers a request with an error status, delays it, drops the
// connection, or lets the server commit a write and then runs a hook (a
// SIGKILL of the operator) before the reply is passed on. Watches are
// streamed, and can be cut (CutWatches) as a restarting API server cuts
// them. The operator connects without credentials; the proxy reaches
// the API server with its own and impersonates the operator's user, so the
// operator keeps exactly its RBAC.
package faultproxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Request is what a rule sees of a request.
type Request struct {
	Method string
	// Group, Resource, Subresource and Namespace are parsed from the path;
	// Resource is empty for discovery and other non-resource requests.
	Group, Resource, Subresource, Namespace, Name string
	// Write is true for a create, update, patch or delete that is not a
	// dry run.
	Write bool
	// Watch is true for a watch (a GET with watch=true): a long response
	// CutWatches can end.
	Watch bool
	// Seq is the number of this write among the writes the proxy saw so
	// far (1 for the first); 0 for a read.
	Seq int
	// Body is a write's body.
	Body []byte
}

// Kind of an Action.
type Kind int

const (
	// Pass forwards the request.
	Pass Kind = iota
	// Fail answers Code without forwarding.
	Fail
	// Delay forwards the request after Delay.
	Delay
	// Drop closes the connection without an answer.
	Drop
	// AfterCommit forwards the request and, once the server has answered,
	// runs Then before the answer is passed on (or not, if Then kills the
	// client).
	AfterCommit
)

// Action is a rule's verdict on a request.
type Action struct {
	Kind  Kind
	Code  int
	Delay time.Duration
	Then  func()
}

// Rule decides what happens to a request; it may count writes itself.
type Rule func(Request) Action

// Proxy is a running fault proxy.
type Proxy struct {
	// URL is where clients reach the proxy, plain HTTP on loopback.
	URL string
	// Kubeconfig is a kubeconfig file for URL.
	Kubeconfig string

	mu        sync.Mutex
	rule      Rule
	writes    int
	stats     Stats
	committed []Request
	// watches are the watches in flight, each with what ends it.
	watches map[*watchCall]struct{}

	server *http.Server
}

// Stats count what the proxy saw.
type Stats struct {
	// Writes are the writes forwarded; Faults the requests a rule failed,
	// delayed, dropped or hooked.
	Writes, Faults int
}

// Committed counts the writes the API server accepted that match.
func (p *Proxy) Committed(match func(Request) bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.committed {
		if match(r) {
			n++
		}
	}
	return n
}

// Start serves a proxy to the API server cfg reaches, impersonating user
// (none when empty), and writes a kubeconfig for it into dir.
func Start(cfg *rest.Config, user, dir string) (*Proxy, error) {
	upstream, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("parse the API server's address: %w", err)
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("build the transport to the API server: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen on loopback: %w", err)
	}
	p := &Proxy{URL: "http://" + l.Addr().String()}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(upstream)
			r.Out.Host = upstream.Host
			r.Out.Header.Del("Authorization")
			if user != "" {
				r.Out.Header.Set("Impersonate-User", user)
			}
		},
		Transport: transport,
		// Watches are long responses: pass every event on at once.
		FlushInterval: -1,
	}
	p.server = &http.Server{Handler: p.handler(rp), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.server.Serve(l) }()
	p.Kubeconfig = filepath.Join(dir, fmt.Sprintf("proxy-%d.kubeconfig", l.Addr().(*net.TCPAddr).Port))
	kc := clientcmdapi.NewConfig()
	kc.Clusters["proxy"] = &clientcmdapi.Cluster{Server: p.URL}
	kc.AuthInfos["none"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "none"}
	kc.CurrentContext = "proxy"
	if err := clientcmd.WriteToFile(*kc, p.Kubeconfig); err != nil {
		p.Close()
		return nil, fmt.Errorf("write the proxy's kubeconfig: %w", err)
	}
	return p, nil
}

// SetRule replaces the rule; nil passes everything.
func (p *Proxy) SetRule(r Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rule = r
}

// Stats returns a copy of the counts so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// CommittedList lists the writes the API server accepted that match, in
// order, as "METHOD group/resource[/subresource] namespace/name": what a
// spec names when writes it did not expect were made.
func (p *Proxy) CommittedList(match func(Request) bool) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, r := range p.committed {
		if !match(r) {
			continue
		}
		res := r.Group + "/" + r.Resource
		if r.Subresource != "" {
			res += "/" + r.Subresource
		}
		out = append(out, fmt.Sprintf("%s %s %s/%s", r.Method, res, r.Namespace, r.Name))
	}
	return out
}

// watchCall is a watch in flight.
type watchCall struct {
	req    Request
	cancel context.CancelFunc
}

// CutWatches ends the watches in flight that match, as a load balancer or
// an API server restart does; it returns how many it ended. The client
// sees its stream end and watches again, or lists again if the rule
// refuses the new watch with 410 Gone.
func (p *Proxy) CutWatches(match func(Request) bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for w := range p.watches {
		if match(w.req) {
			w.cancel()
			delete(p.watches, w)
			n++
		}
	}
	return n
}

// Close stops the proxy and cuts every connection.
func (p *Proxy) Close() {
	_ = p.server.Close()
	_ = os.Remove(p.Kubeconfig)
}

func (p *Proxy) handler(rp *httputil.ReverseProxy) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := parse(r)
		p.mu.Lock()
		if req.Write {
			p.writes++
			req.Seq = p.writes
		}
		rule := p.rule
		p.mu.Unlock()
		action := Action{Kind: Pass}
		if rule != nil {
			action = rule(req)
		}
		if action.Kind != Pass {
			p.count(func(s *Stats) { s.Faults++ })
		}
		switch action.Kind {
		case Fail:
			http.Error(w, fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected by the fault proxy","code":%d}`, action.Code), action.Code)
			return
		case Drop:
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					_ = conn.Close()
					return
				}
			}
			panic(http.ErrAbortHandler)
		case Delay:
			select {
			case <-time.After(action.Delay):
			case <-r.Context().Done():
				return
			}
		case AfterCommit:
			rec := &held{header: http.Header{}}
			rp.ServeHTTP(rec, r)
			p.recordWrite(req, rec.code)
			if action.Then != nil {
				action.Then()
			}
			rec.replay(w)
			return
		}
		if req.Watch {
			ctx, cancel := context.WithCancel(r.Context())
			call := &watchCall{req: req, cancel: cancel}
			p.mu.Lock()
			if p.watches == nil {
				p.watches = map[*watchCall]struct{}{}
			}
			p.watches[call] = struct{}{}
			p.mu.Unlock()
			defer func() {
				p.mu.Lock()
				delete(p.watches, call)
				p.mu.Unlock()
				cancel()
			}()
			r = r.WithContext(ctx)
		}
		rw := &statusWriter{ResponseWriter: w}
		rp.ServeHTTP(rw, r)
		p.recordWrite(req, rw.code)
	})
}

func (p *Proxy) count(f func(*Stats)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(&p.stats)
}

func (p *Proxy) recordWrite(req Request, code int) {
	if !req.Write || code >= 300 || code == 0 {
		return
	}
	p.count(func(s *Stats) {
		s.Writes++
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	req.Body = nil
	p.committed = append(p.committed, req)
}

// parse reads the group, resource and namespace of a request from its path.
func parse(r *http.Request) Request {
	req := Request{Method: r.Method}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		req.Group = parts[1]
		parts = parts[3:]
	default:
		return req
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) > 2 {
		req.Namespace = parts[1]
		parts = parts[2:]
	}
	if len(parts) > 0 {
		req.Resource = parts[0]
	}
	if len(parts) > 1 {
		req.Name = parts[1]
	}
	if len(parts) > 2 {
		req.Subresource = parts[2]
	}
	if r.Method == http.MethodGet {
		w := r.URL.Query().Get("watch")
		req.Watch = w == "true" || w == "1"
	}
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		req.Write = !strings.Contains(r.URL.RawQuery, "dryRun=")
		if r.Body != nil {
			body, err := io.ReadAll(r.Body)
			if err == nil {
				req.Body = body
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
		}
	}
	return req
}

// held keeps an answer until the hook has run.
type held struct {
	header http.Header
	code   int
	body   []byte
}

func (h *held) Header() http.Header { return h.header }
func (h *held) WriteHeader(code int) {
	if h.code == 0 {
		h.code = code
	}
}
func (h *held) Write(b []byte) (int, error) {
	if h.code == 0 {
		h.code = http.StatusOK
	}
	h.body = append(h.body, b...)
	return len(b), nil
}

func (h *held) replay(w http.ResponseWriter) {
	for k, v := range h.header {
		w.Header()[k] = v
	}
	w.WriteHeader(h.code)
	_, _ = w.Write(h.body)
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Flush passes streamed watch events on.
func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
