package controller

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// errStaleDecision is a decision whose dry run the API server refused
// because a workload had changed since the operator read it: the
// decision was made on a cache behind the API server.
var errStaleDecision = fmt.Errorf("a workload changed since the decision read it: %w", errStale)

// maxStaleWait bounds how long a migration whose decisions keep going
// stale waits before it decides again.
const maxStaleWait = 30 * time.Second

// staleDecisions counts, for each migration, its decisions in a row that
// went stale (errStaleDecision). A read that trails the API server by a
// moment is decided again at once; a workload that changes faster than
// the operator decides, or a feed that has stopped, is decided again ever
// less often (200 ms, doubling, up to maxStaleWait), so that the dry runs
// it costs stay bounded.
type staleDecisions struct {
	mu sync.Mutex
	n  map[types.NamespacedName]int
}

// refused counts a stale decision of key and says how many there have
// been in a row and how long to wait before the next.
func (s *staleDecisions) refused(key types.NamespacedName) (int, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[types.NamespacedName]int{}
	}
	s.n[key]++
	return s.n[key], staleWait(s.n[key])
}

// forget ends key's run of stale decisions.
func (s *staleDecisions) forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.n, key)
}

// staleWait is the wait after the n-th stale decision in a row.
func staleWait(n int) time.Duration {
	wait := staleRetry
	for i := 1; i < n && wait < maxStaleWait; i++ {
		wait *= 2
	}
	return min(wait, maxStaleWait)
}

// isStaleDecision reports whether err is a stale decision.
func isStaleDecision(err error) bool { return errors.Is(err, errStaleDecision) }
