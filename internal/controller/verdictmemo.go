package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// verdictMemo keeps, per migration, the last disruption verdict and the
// fingerprint of its inputs.
type verdictMemo struct {
	mu   sync.Mutex
	last map[types.NamespacedName]memoized
}

type memoized struct {
	key     string
	verdict disruptionVerdict
}

func (m *verdictMemo) get(name types.NamespacedName, key string) (disruptionVerdict, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	got, ok := m.last[name]
	return got.verdict, ok && got.key == key
}

func (m *verdictMemo) put(name types.NamespacedName, key string, v disruptionVerdict) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		m.last = map[types.NamespacedName]memoized{}
	}
	m.last[name] = memoized{key: key, verdict: v}
}

// forget drops a deleted migration's verdict.
func (m *verdictMemo) forget(name types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.last, name)
}
