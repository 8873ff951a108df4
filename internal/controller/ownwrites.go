package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// ownWrites remembers, per migration, the resourceVersions the
// reconciler's own writes of it replaced. The cache learns of a write
// through the write's watch event, a moment after it is made; an event of
// another object (a pod, a workload) can start a reconcile in between. A
// migration the cache still returns at a replaced version is behind the
// reconciler's own write: acting on it would decide again what the write
// already recorded, and its optimistic lock would be refused (409). The
// write's own event reconciles it again once the cache has it.
type ownWrites struct {
	mu       sync.Mutex
	replaced map[types.NamespacedName][]string
}

// wrote records that a write of migration key replaced version rv with
// version now. A write that changed nothing the API server stores (a
// time its precision rounds to the one stored) leaves the version as it
// was: nothing is replaced, and the cache is not behind.
func (w *ownWrites) wrote(key types.NamespacedName, rv, now string) {
	if rv == now {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.replaced == nil {
		w.replaced = map[types.NamespacedName][]string{}
	}
	w.replaced[key] = append(w.replaced[key], rv)
}

// behind reports whether the cache's migration key, read at version rv,
// is behind one of the reconciler's own writes. A version no write
// replaced is the last write's or a later one: what was remembered of the
// migration is dropped then, since the cache only moves forward.
func (w *ownWrites) behind(key types.NamespacedName, rv string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, replaced := range w.replaced[key] {
		if replaced == rv {
			return true
		}
	}
	delete(w.replaced, key)
	return false
}

// forget drops what was remembered of a migration that is gone.
func (w *ownWrites) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.replaced, key)
}
