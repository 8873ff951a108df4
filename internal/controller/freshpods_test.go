package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/pacing"
)

// migrationIn is a migration of one target, the spec of generation
// observed at observed, verified at the final stage when succeeded.
func migrationIn(succeeded bool, generation, observed int64) *pgv1.PlacementMigration {
	pm := &pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Generation: generation}}
	pm.Status.ObservedGeneration = observed
	ts := pgv1.TargetStatus{Kind: pgv1.KindDeployment, Name: "web"}
	if succeeded {
		ts.Verified = &pgv1.StageMilestone{Stage: pm.Spec.Final()}
	}
	pm.Status.Targets = []pgv1.TargetStatus{ts}
	return pm
}

// The pod feed is paced only while every migration is settled. A
// migration going to work (new, its spec changed) hurries it and waits
// once for the events the pace held back; a settled one judges at once
// and leaves the pace alone.
func TestAMigrationGoingToWorkWaitsForThePodsHeldBack(t *testing.T) {
	const every = time.Hour
	pods, nodes := pacing.NewPacer(every), pacing.NewPacer(every/2)
	r := &PlacementMigrationReconciler{feeds: feeds{{pacer: pods}, {pacer: nodes}}}
	r.interests.onAtWork = r.feeds.keepUp
	pacer := pods
	settled, fresh := types.NamespacedName{Namespace: "shop", Name: "settled"}, types.NamespacedName{Namespace: "shop", Name: "new"}

	r.interests.set(settled, &interest{settled: true})
	r.interests.markAtWork(settled)
	if wait := r.freshPodsIn(settled, migrationIn(true, 1, 1)); wait != 0 || pacer.HurriedFor() != 0 {
		t.Fatalf("a settled migration waited %v and hurried the feed for %v; it must judge at once, the feed paced", wait, pacer.HurriedFor())
	}

	r.interests.markAtWork(fresh)
	if pacer.HurriedFor() == 0 || nodes.HurriedFor() == 0 {
		t.Fatal("a new migration, at work, did not hurry both feeds")
	}
	first := r.freshPodsIn(fresh, migrationIn(false, 1, 0))
	if first <= every-time.Minute || first > every {
		t.Fatalf("a new migration waits %v, want the interval the feed was paced for", first)
	}

	// Its spec changed, the settled migration goes to work: it waits what
	// is left of the same interval, and keeps the feed hurried.
	changed := r.freshPodsIn(settled, migrationIn(true, 2, 1))
	if changed <= 0 || changed > first {
		t.Fatalf("a migration whose spec changed waits %v, want what is left of %v", changed, first)
	}
	r.interests.set(fresh, &interest{settled: true})
	if pacer.HurriedFor() == 0 {
		t.Fatal("the feed went back to its pace while a migration whose spec changed was at work")
	}
	if wait := r.freshPodsIn(types.NamespacedName{Namespace: "shop", Name: "leaving"}, deleting()); wait <= 0 {
		t.Fatal("a settled migration being deleted did not wait for the pods held back")
	}
	r.interests.forget(types.NamespacedName{Namespace: "shop", Name: "leaving"})
	r.interests.set(settled, &interest{settled: true})
	if pacer.HurriedFor() != 0 {
		t.Fatal("the feed stayed hurried once every migration settled")
	}

	if nodes.HurriedFor() != 0 {
		t.Fatal("the node feed stayed hurried once every migration settled")
	}

	unpaced := &PlacementMigrationReconciler{feeds: feeds{{}, {}}}
	if wait := unpaced.freshPodsIn(fresh, migrationIn(false, 1, 0)); wait != 0 {
		t.Fatalf("a migration waited %v on an unpaced feed", wait)
	}
}

func deleting() *pgv1.PlacementMigration {
	pm := migrationIn(true, 1, 1)
	pm.DeletionTimestamp = &metav1.Time{Time: time.Unix(1e9, 0)}
	return pm
}
