package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/placement-guard/placement-guard/internal/planning"
)

// verdictMemo keeps, per migration, the last disruption verdict and the
// fingerprint of its inputs.
type verdictMemo struct {
	mu   sync.Mutex
	last map[types.NamespacedName]memoized
}

type memoized struct {
	key     string
	verdict planning.DisruptionVerdict
}

func (m *verdictMemo) get(name types.NamespacedName, key string) (planning.DisruptionVerdict, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	got, ok := m.last[name]
	return got.verdict, ok && got.key == key
}

func (m *verdictMemo) put(name types.NamespacedName, key string, v planning.DisruptionVerdict) {
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
