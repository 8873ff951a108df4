package controller

import (
	"sync"
	"time"
)

// WriteBudget bounds how often any workload is written, by every migration
// together: a circuit breaker for a loop nobody foresaw (two writers taking
// a field from each other, a controller that reverts every write). A
// migration that would exceed it stalls instead of writing. It is kept in
// memory: a restarted operator starts with a full budget.
type WriteBudget struct {
	// Max writes per workload within Window.
	Max    int
	Window time.Duration

	mu     sync.Mutex
	writes map[string][]time.Time
}

// DefaultWriteBudget allows 6 writes per workload in 10 minutes: a
// migration writes twice (soft, hard), a rollback once more.
func DefaultWriteBudget() *WriteBudget {
	return &WriteBudget{Max: 6, Window: 10 * time.Minute}
}

// Allow reports whether the workload may be written at now.
func (b *WriteBudget) Allow(workload string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.recent(workload, now)) < b.Max
}

// Record counts a write made at now.
func (b *WriteBudget) Record(workload string, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.writes == nil {
		b.writes = map[string][]time.Time{}
	}
	b.writes[workload] = append(b.recent(workload, now), now)
}

// Reset forgets a workload's writes, when a person asks for a retry.
func (b *WriteBudget) Reset(workload string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.writes, workload)
}

// recent drops the writes older than the window, and forgets a workload
// with none left, so that the budget holds only workloads written within
// the window; b.mu is held.
func (b *WriteBudget) recent(workload string, now time.Time) []time.Time {
	kept := b.writes[workload][:0]
	for _, t := range b.writes[workload] {
		if now.Sub(t) < b.Window {
			kept = append(kept, t)
		}
	}
	if len(kept) == 0 {
		delete(b.writes, workload)
		return nil
	}
	b.writes[workload] = kept
	return kept
}

// Len is how many workloads the budget remembers writes of.
func (b *WriteBudget) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.writes)
}
