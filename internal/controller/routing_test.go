package controller

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// A node's change queues every settled migration for a second later. When
// that second ends while a migration at work waits for the worker (its
// node has just come), the migration at work goes first, not behind fifty
// settled ones: that wait was the slow tail of node-to-apply latency.
func TestSettledMigrationsWaitBehindTheOnesAtWork(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("routing-test")
	defer q.ShutDown()
	var settled []reconcile.Request
	for i := range 50 {
		settled = append(settled, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "bench", Name: fmt.Sprintf("settled-%02d", i)}})
	}
	addLater(q, settled)
	if n := q.Len(); n != 0 {
		t.Fatalf("%d settled migrations were ready at once, want them a second later", n)
	}
	deadline := time.Now().Add(time.Minute)
	for q.Len() < len(settled) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d settled migrations became ready", q.Len(), len(settled))
		}
		time.Sleep(10 * time.Millisecond)
	}
	atWork := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "latency", Name: "waiting"}}
	q.Add(atWork)
	first, _ := q.Get()
	if first != atWork {
		t.Fatalf("the worker took %v first, want the migration at work, %v", first, atWork)
	}
}
