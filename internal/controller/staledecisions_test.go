package controller

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestStaleDecisionsAreDecidedAgainEverLessOftenUpToABound(t *testing.T) {
	var s staleDecisions
	web, db := types.NamespacedName{Namespace: "shop", Name: "web-apart"}, types.NamespacedName{Namespace: "shop", Name: "db-apart"}
	want := []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond,
		3200 * time.Millisecond, 6400 * time.Millisecond, 12800 * time.Millisecond, 25600 * time.Millisecond, maxStaleWait, maxStaleWait}
	for i, w := range want {
		n, got := s.refused(web)
		if n != i+1 || got != w {
			t.Fatalf("refusal %d: got (%d, %s), want (%d, %s)", i+1, n, got, i+1, w)
		}
	}
	if n, got := s.refused(db); n != 1 || got != staleRetry {
		t.Errorf("another migration's first stale decision: got (%d, %s), want (1, %s)", n, got, staleRetry)
	}
	s.forget(web)
	if n, got := s.refused(web); n != 1 || got != staleRetry {
		t.Errorf("after a decision that was not stale: got (%d, %s), want (1, %s)", n, got, staleRetry)
	}
	for range 100 {
		s.refused(db)
	}
	if n, got := s.refused(db); n != 102 || got != maxStaleWait {
		t.Errorf("a long run of stale decisions: got (%d, %s), want (102, the bound %s)", n, got, maxStaleWait)
	}
}

func TestOnlyARefusedDryRunIsAStaleDecision(t *testing.T) {
	decision := fmt.Errorf("dry-run the Soft stage on Deployment/web, read at resourceVersion 7: %w", errStaleDecision)
	if !isStaleDecision(decision) || !errors.Is(decision, errStale) {
		t.Errorf("a refused dry run: stale decision %v, stale %v; want both", isStaleDecision(decision), errors.Is(decision, errStale))
	}
	read := fmt.Errorf("PlacementMigration shop/web-apart changed since it was read: %w", errStale)
	if isStaleDecision(read) {
		t.Errorf("a migration read behind its own write is not a stale decision")
	}
}
