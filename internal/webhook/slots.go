package webhook

import (
	"sync"
)

// Slots bound the judgements made at once. A judgement holds the snapshot
// the feeds and reconcilers share, so more at once only queue: a request
// that finds no slot is answered at once, not judged. No one holder may
// take more than its share, so that a burst from one source leaves the
// others slots of their own: a requesting user (when the API server is
// known by its certificate, the user it says sent the write is its word)
// may hold half of them, a source address three quarters.
type Slots struct {
	mu       sync.Mutex
	max      int
	taken    int
	byHolder map[string]int
}

// NewSlots makes max slots.
func NewSlots(n int) *Slots {
	return &Slots{max: n, byHolder: map[string]int{}}
}

// share is how many slots one holder of the kind may hold at most (at
// least one).
func (s *Slots) share(h holder) int {
	if h.user {
		return max(1, s.max/2)
	}
	return max(1, s.max*3/4)
}

// take takes a slot for h, and says whether one was free to it.
func (s *Slots) take(h holder) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.taken >= s.max || s.byHolder[h.key] >= s.share(h) {
		return false
	}
	s.taken++
	s.byHolder[h.key]++
	return true
}

// give gives back a slot h took.
func (s *Slots) give(h holder) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.taken--
	if s.byHolder[h.key]--; s.byHolder[h.key] <= 0 {
		delete(s.byHolder, h.key)
	}
}

// holder is who a slot is taken for: a requesting user, when the API
// server is known by its certificate, else a source address.
type holder struct {
	key  string
	user bool
}
