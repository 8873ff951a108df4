package rebalance

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/planning"
)

var rebalanceNow = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func moveStep(spec pgv1.PlacementMigrationSpec, moves ...pgv1.PodMove) *Step {
	pm := &pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-zones"}, Spec: spec}
	pm.Status.Rebalance = &pgv1.RebalanceStatus{Moves: moves}
	return &Step{Migration: pm, Now: rebalanceNow}
}

func movedAgo(d time.Duration, result, replacement string) pgv1.PodMove {
	return pgv1.PodMove{Target: "Deployment/web", Pod: "web-x", At: metav1.NewTime(rebalanceNow.Add(-d)), Result: result, Replacement: replacement}
}

// The budget counts the moves of the last hour, refused ones included, and
// says when the oldest of them leaves the window.
func TestTheMoveBudgetCountsTheLastHour(t *testing.T) {
	cases := []struct {
		name  string
		moves []pgv1.PodMove
		used  int
		until time.Duration
	}{
		{name: "no move", until: time.Hour},
		{name: "two landed and a refusal within the hour", used: 3, until: 40 * time.Minute,
			moves: []pgv1.PodMove{movedAgo(20*time.Minute, moveLanded, "a"), movedAgo(10*time.Minute, moveRefused, ""), movedAgo(time.Minute, moveLanded, "b")}},
		{name: "moves older than the hour are forgotten", used: 1, until: 50 * time.Minute,
			moves: []pgv1.PodMove{movedAgo(2*time.Hour, moveLanded, "a"), movedAgo(61*time.Minute, moveLanded, "b"), movedAgo(10*time.Minute, moveLanded, "c")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			used, until := moveStep(pgv1.PlacementMigrationSpec{}, tc.moves...).movesWithin(planning.MoveWindow)
			if used != tc.used || until != tc.until {
				t.Fatalf("used %d, next in %s; want %d, %s", used, until, tc.used, tc.until)
			}
		})
	}
}
