package clusterstate

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/placement-guard/placement-guard/internal/placement"
)

// A judgement queued behind a long one gives up when its budget ends,
// without taking the snapshot, and the snapshot is free again once the
// long one returns: nothing waits for the snapshot past its own end.
func TestAQuestionStopsWaitingForTheSnapshotWhenItsContextEnds(t *testing.T) {
	state := NewClusterState()
	held, release := make(chan struct{}), make(chan struct{})
	go func() {
		_ = state.With(context.Background(), func(*placement.Snapshot) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	asked := false
	err := state.With(ctx, func(*placement.Snapshot) error { asked = true; return nil })
	if !errors.Is(err, placement.ErrInterrupted) || !errors.Is(err, context.DeadlineExceeded) || asked {
		t.Fatalf("behind a held snapshot: err %v, asked %v; want it to give up unasked", err, asked)
	}
	close(release)
	if err := state.With(context.Background(), func(*placement.Snapshot) error { asked = true; return nil }); err != nil || !asked {
		t.Fatalf("once released, the snapshot is taken: err %v, asked %v", err, asked)
	}
}
