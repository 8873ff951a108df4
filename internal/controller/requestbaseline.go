package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// requestBaselines remember, per migration, the nodes there were when its
// capacity request was recorded: a node created within the request's own
// second is the autoscaler's only if it was not among them (the API
// server stamps objects to the second). It is kept in memory: after a
// restart such a node is counted only once it qualifies
// (placement.Snapshot.LaunchedFor).
type requestBaselines struct {
	mu   sync.Mutex
	seen map[types.NamespacedName]requestBaseline
}

type requestBaseline struct {
	since time.Time
	nodes map[string]struct{}
}

// remember records the nodes there are as a request is recorded at since.
func (b *requestBaselines) remember(key types.NamespacedName, since time.Time, nodes []string) {
	set := make(map[string]struct{}, len(nodes))
	for _, n := range nodes {
		set[n] = struct{}{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen == nil {
		b.seen = map[types.NamespacedName]requestBaseline{}
	}
	b.seen[key] = requestBaseline{since: since.Truncate(time.Second), nodes: set}
}

// existed says whether a node was there when the request recorded at
// since was made; nil when that is not known.
func (b *requestBaselines) existed(key types.NamespacedName, since time.Time) func(string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	rb, ok := b.seen[key]
	if !ok || !rb.since.Equal(since.Truncate(time.Second)) {
		return nil
	}
	return func(node string) bool {
		_, ok := rb.nodes[node]
		return ok
	}
}

// forget drops what was remembered of a migration's request.
func (b *requestBaselines) forget(key types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.seen, key)
}
