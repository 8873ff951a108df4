package controller

import (
	"fmt"
	"testing"
	"time"
)

// The write budget holds only workloads written within its window: an
// operator that reconciles thousands of workloads over weeks must not keep
// an entry for each one forever.
func TestWriteBudgetForgetsWorkloadsOnceTheirWritesAge(t *testing.T) {
	b := &WriteBudget{Max: 2, Window: 10 * time.Minute}
	start := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for i := range 100 {
		w := fmt.Sprintf("ns/Deployment/w%d", i)
		if !b.Allow(w, start) {
			t.Fatalf("%s: a workload never written is allowed", w)
		}
		b.Record(w, start)
	}
	if b.Len() != 100 {
		t.Fatalf("100 workloads written: %d remembered", b.Len())
	}
	b.Record("ns/Deployment/w0", start.Add(time.Minute))
	if b.Allow("ns/Deployment/w0", start.Add(2*time.Minute)) {
		t.Fatal("two writes within the window spend a budget of two")
	}
	later := start.Add(10*time.Minute + time.Second)
	for i := range 100 {
		b.Allow(fmt.Sprintf("ns/Deployment/w%d", i), later)
	}
	if b.Len() != 1 {
		t.Fatalf("past the window only w0's second write is remembered; %d workloads are", b.Len())
	}
	if !b.Allow("ns/Deployment/never-written", later) || b.Len() != 1 {
		t.Fatalf("asking about a workload never written remembers nothing: %d", b.Len())
	}
	if !b.Allow("ns/Deployment/w0", start.Add(11*time.Minute+time.Second)) {
		t.Fatal("once the window has passed, the budget is whole again")
	}
	if b.Len() != 0 {
		t.Fatalf("every write aged out: %d remembered", b.Len())
	}
}
