package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

func benchMigration(name, phase string, finalizers ...string) *pgv1.PlacementMigration {
	return &pgv1.PlacementMigration{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench-00", Name: name, Finalizers: finalizers},
		Status:     pgv1.PlacementMigrationStatus{Phase: pgv1.Phase(phase)},
	}
}

func benchDeployment(name string, generation int64, ready int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench-00", Name: name, Generation: generation},
		Status:     appsv1.DeploymentStatus{ReadyReplicas: ready},
	}
}

// Each change the watches report is counted once, to its migration: a
// status change as a status write, another change of the migration as
// another write, a new generation of its Deployment as a spec write. The
// Deployment controller's status writes and objects of other names are
// not counted.
func TestWritesAreCountedFromTheWatches(t *testing.T) {
	migrations, deployments := watch.NewFake(), watch.NewFake()
	keys := []client.ObjectKey{{Namespace: "bench-00", Name: "a"}, {Namespace: "bench-00", Name: "b"}}
	w := countWrites(keys, migrations, deployments)

	migrations.Add(benchMigration("a", ""))
	migrations.Modify(benchMigration("a", "", "placementguard.io/finalizer"))
	migrations.Modify(benchMigration("a", "Pending", "placementguard.io/finalizer"))
	migrations.Modify(benchMigration("a", "Succeeded", "placementguard.io/finalizer"))
	migrations.Add(benchMigration("b", ""))
	migrations.Modify(benchMigration("b", "Pending"))
	migrations.Add(benchMigration("other", ""))
	migrations.Modify(benchMigration("other", "Pending"))

	deployments.Add(benchDeployment("a", 1, 0))
	deployments.Modify(benchDeployment("a", 1, 2))
	deployments.Modify(benchDeployment("a", 2, 2))
	deployments.Modify(benchDeployment("a", 3, 2))
	deployments.Add(benchDeployment("b", 1, 0))
	deployments.Modify(benchDeployment("other", 5, 0))

	got, err := w.stop()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got.status)
	slices.Sort(got.other)
	slices.Sort(got.deployment)
	if !slices.Equal(got.status, []int{1, 2}) || !slices.Equal(got.other, []int{0, 1}) || !slices.Equal(got.deployment, []int{0, 2}) {
		t.Fatalf("status %v, other %v, deployment %v; want [1 2], [0 1], [0 2]", got.status, got.other, got.deployment)
	}
	if len(got.succeeded) != 1 || got.succeeded[0] < 0 {
		t.Errorf("creation to Succeeded %v, want one duration: a succeeded, b did not", got.succeeded)
	}
	if !strings.Contains(got.markdown(), "| creation to Succeeded (1 of 2) |") {
		t.Errorf("the report does not give the time to succeed:\n%s", got.markdown())
	}
}

// A watch the API server ends before the count stops is an error: the
// writes after it would go uncounted.
func TestAWatchEndedEarlyIsAnError(t *testing.T) {
	migrations, deployments := watch.NewFake(), watch.NewFake()
	w := countWrites([]client.ObjectKey{{Namespace: "bench-00", Name: "a"}}, migrations, deployments)
	deployments.Stop()
	// The count stops after its follower has seen the watch end, as it
	// would minutes later on a real cluster.
	deadline := time.Now().Add(10 * time.Second)
	for len(w.ended) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	_, err := w.stop()
	if err == nil || !strings.Contains(err.Error(), "ended the watch of the Deployments early") {
		t.Fatalf("err = %v, want the Deployments' watch ended early", err)
	}
}

// Stopping the count closes the watches' streams, which a watch of the
// API server may report as an error event: that is not a failure.
func TestAnErrorAfterTheStopIsNoFailure(t *testing.T) {
	events := make(chan watch.Event)
	migrations, deployments := watch.NewFake(), watch.NewProxyWatcher(events)
	w := countWrites([]client.ObjectKey{{Namespace: "bench-00", Name: "a"}}, migrations, deployments)
	migrations.Add(benchMigration("a", ""))
	stopped := make(chan error, 1)
	go func() {
		_, err := w.stop()
		stopped <- err
	}()
	for !w.stopped.Load() {
		time.Sleep(time.Millisecond)
	}
	events <- watch.Event{Type: watch.Error, Object: &metav1.Status{Message: "http2: response body closed"}}
	close(events)
	if err := <-stopped; err != nil {
		t.Fatalf("an error event after the stop failed the count: %v", err)
	}
}

// A status write is described by the phase it moved to, the conditions
// it changed and the other fields it touched.
func TestAStatusChangeIsDescribed(t *testing.T) {
	before := `{"phase":"Pending","conditions":[{"type":"Ready","status":"False","reason":"Pending"},{"type":"Feasible","status":"True","reason":"Feasible"}],"capacity":{"n":1},"old":1}`
	after := `{"phase":"ApplyingSoft","conditions":[{"type":"Ready","status":"False","reason":"ApplyingSoft"},{"type":"Feasible","status":"True","reason":"Feasible"}],"capacity":{"n":1},"operation":{"stage":"Soft"}}`
	want := "phase ApplyingSoft; conditions Ready=False/ApplyingSoft; old (removed), operation"
	if got := statusChange(before, after); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	progressed := `{"phase":"ApplyingSoft","conditions":[{"type":"Ready","status":"False","reason":"ApplyingSoft","message":"1 of 2"}]}`
	more := `{"phase":"ApplyingSoft","conditions":[{"type":"Ready","status":"False","reason":"ApplyingSoft","message":"2 of 2"}]}`
	if got := statusChange(progressed, more); got != "condition messages only" {
		t.Errorf("a change of a message alone: %q", got)
	}
}
