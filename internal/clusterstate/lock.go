package clusterstate

import "context"

// snapshotLock is a mutex that a question can stop waiting for: the
// admission check answers within its budget, and a judgement queued
// behind a long one must give up when its budget ends rather than take
// the snapshot after its answer was sent. Events take it unconditionally.
type snapshotLock chan struct{}

func newSnapshotLock() snapshotLock { return make(snapshotLock, 1) }

// Lock takes the lock, waiting as long as it takes.
func (l snapshotLock) Lock() { l <- struct{}{} }

// Unlock gives the lock back.
func (l snapshotLock) Unlock() { <-l }

// LockContext takes the lock, or gives up when ctx ends first.
func (l snapshotLock) LockContext(ctx context.Context) error {
	select {
	case l <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
