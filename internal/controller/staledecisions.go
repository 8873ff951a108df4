package controller

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
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
// less often (staleRetry, doubling, up to maxStaleWait), so that the dry
// runs it costs stay bounded. The counting is client-go's per-item
// exponential limiter, kept apart from the work queue's own so that a
// stale decision is told from a failure.
type staleDecisions struct {
	once    sync.Once
	limiter workqueue.TypedRateLimiter[types.NamespacedName]
}

// refused counts a stale decision of key and says how many there have
// been in a row and how long to wait before the next.
func (s *staleDecisions) refused(key types.NamespacedName) (int, time.Duration) {
	s.once.Do(s.start)
	wait := s.limiter.When(key)
	return s.limiter.NumRequeues(key), wait
}

// forget ends key's run of stale decisions.
func (s *staleDecisions) forget(key types.NamespacedName) {
	s.once.Do(s.start)
	s.limiter.Forget(key)
}

func (s *staleDecisions) start() {
	s.limiter = workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](staleRetry, maxStaleWait)
}

// isStaleDecision reports whether err is a stale decision.
func isStaleDecision(err error) bool { return errors.Is(err, errStaleDecision) }
