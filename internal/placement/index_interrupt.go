package placement

import (
	"context"
	"errors"
	"fmt"
)

// A question asked within a context stops when the context ends: the
// admission check answers within its budget, and whatever it asked must
// not go on under the lock that the feeds and the reconcilers share once
// the answer is sent. The simulations look at the flag before each pod
// they place and each step they take, which bounds what runs on after
// the end to one placement.

// ErrInterrupted is the error of a question stopped because its context
// ended: its answer, whatever it was, is not used.
var ErrInterrupted = errors.New("the question was stopped before it was answered")

// Within runs f, which asks the snapshot questions, and stops them when
// ctx ends: every simulation then gives up at its next pod, and Within
// returns ErrInterrupted (wrapping the context's cause), whatever f
// returned. The snapshot is not safe for concurrent use, so neither is
// Within: its caller holds the snapshot for f's duration.
func (s *Snapshot) Within(ctx context.Context, f func(*Snapshot) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrInterrupted, context.Cause(ctx))
	}
	outer := s.done
	s.done = ctx.Done()
	defer func() { s.done = outer }()
	err := f(s)
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ErrInterrupted, context.Cause(ctx))
	}
	return err
}

// interrupted reports whether the question being asked was stopped. It
// is looked at once per pod placed, a few nanoseconds beside the tens of
// microseconds a placement takes.
func (s *Snapshot) interrupted() bool {
	if s.done == nil {
		return false
	}
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}
