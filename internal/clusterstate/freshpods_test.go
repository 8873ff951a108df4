package clusterstate

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/placement-guard/placement-guard/internal/pacing"
)

// The feeds are paced only while every migration is settled. A migration
// going to work (new, its spec changed, being deleted) hurries them and
// waits once for the events the pace held back; a settled one leaves the
// pace alone.
func TestAMigrationGoingToWorkWaitsForThePodsHeldBack(t *testing.T) {
	const every = time.Hour
	pods, nodes := pacing.NewPacer(every), pacing.NewPacer(every/2)
	r := NewRouter(Feeds{{pacer: pods}, {pacer: nodes}})
	settled, fresh := types.NamespacedName{Namespace: "shop", Name: "settled"}, types.NamespacedName{Namespace: "shop", Name: "new"}

	r.Set(settled, &Interest{Settled: true})
	r.MarkAtWork(settled)
	if pods.HurriedFor() != 0 || nodes.HurriedFor() != 0 {
		t.Fatal("looking at a settled migration hurried the feeds")
	}

	r.MarkAtWork(fresh)
	if pods.HurriedFor() == 0 || nodes.HurriedFor() == 0 {
		t.Fatal("a new migration, at work, did not hurry both feeds")
	}
	first := r.GoingToWork(fresh)
	if first <= every-time.Minute || first > every {
		t.Fatalf("a new migration waits %v, want the interval the feed was paced for", first)
	}

	// Its spec changed, the settled migration goes to work: it waits what
	// is left of the same interval, and keeps the feed hurried.
	changed := r.GoingToWork(settled)
	if changed <= 0 || changed > first {
		t.Fatalf("a migration whose spec changed waits %v, want what is left of %v", changed, first)
	}
	r.Set(fresh, &Interest{Settled: true})
	if pods.HurriedFor() == 0 {
		t.Fatal("the feed went back to its pace while a migration whose spec changed was at work")
	}
	leaving := types.NamespacedName{Namespace: "shop", Name: "leaving"}
	if wait := r.GoingToWork(leaving); wait <= 0 {
		t.Fatal("a migration being deleted did not wait for the pods held back")
	}
	r.Forget(leaving)
	r.Set(settled, &Interest{Settled: true})
	if pods.HurriedFor() != 0 || nodes.HurriedFor() != 0 {
		t.Fatal("the feeds stayed hurried once every migration settled")
	}

	unpaced := NewRouter(Feeds{{}, {}})
	if wait := unpaced.GoingToWork(fresh); wait != 0 {
		t.Fatalf("a migration waited %v on unpaced feeds", wait)
	}
}
