package webhook

import (
	"context"
	"net"
	"net/http"
	"sync"
)

// Slots bound the judgements made at once. The check's port answers
// whoever reaches it, and a judgement holds the snapshot the feeds and
// reconcilers share, so more at once only queue: a request that finds no
// slot is answered at once, not judged. No one source address may hold
// more than three quarters of them, so that a pod flooding the port
// directly leaves the API server a share of its own.
type Slots struct {
	mu        sync.Mutex
	max       int
	perSource int
	taken     int
	bySource  map[string]int
}

// NewSlots makes max slots; no source may hold more than three quarters
// of them (at least one).
func NewSlots(n int) *Slots {
	return &Slots{max: n, perSource: max(1, n*3/4), bySource: map[string]int{}}
}

// take takes a slot for source, and says whether one was free to it.
func (s *Slots) take(source string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.taken >= s.max || s.bySource[source] >= s.perSource {
		return false
	}
	s.taken++
	s.bySource[source]++
	return true
}

// give gives back a slot source took.
func (s *Slots) give(source string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.taken--
	if s.bySource[source]--; s.bySource[source] <= 0 {
		delete(s.bySource, source)
	}
}

// sourceKey is the context key of a request's source address.
type sourceKey struct{}

// withSource puts the address a request came from (its host, without the
// port) in the request's context, for the judgement's slot.
func withSource(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sourceKey{}, host)))
	})
}

// sourceOf is the source address withSource put in ctx; "" when none.
func sourceOf(ctx context.Context) string {
	s, _ := ctx.Value(sourceKey{}).(string)
	return s
}
