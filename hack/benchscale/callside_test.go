package main

import (
	"strings"
	"testing"
)

// The stretch of the stream keeps what the API server's runtime was at
// its start (a new goroutine's stack, its goroutines) and the differences
// of its counters, and the report says both.
func TestTheStreamKeepsTheAPIServersStartingStackFromItsStart(t *testing.T) {
	before := callSides{apiServerCPU: 100, startingStack: 4096, goroutines: 2300}
	after := callSides{apiServerCPU: 116.5, startingStack: 8192, goroutines: 2310}
	got := after.since(before)
	if got.startingStack != 4096 || got.goroutines != 2300 {
		t.Fatalf("starting stack %.0f and goroutines %.0f, want the start's 4096 and 2300", got.startingStack, got.goroutines)
	}
	if got.apiServerCPU != 16.5 {
		t.Fatalf("CPU %.1f s, want 16.5", got.apiServerCPU)
	}
	if report := callSidesMarkdown(got); !strings.Contains(report, "2300 goroutines, each new one started on a 4 KiB stack") {
		t.Fatalf("the report does not give the start's stack:\n%s", report)
	}
}

// The starting stack is read from the runtime's gauge on the metrics
// page, not from a family that shares its prefix.
func TestTheStartingStackIsReadFromItsGauge(t *testing.T) {
	page := "# TYPE go_gc_stack_starting_size_bytes gauge\ngo_gc_stack_starting_size_bytes_other 1\ngo_gc_stack_starting_size_bytes 16384\ngo_goroutines 2286\n"
	if got := counterOf(page, "go_gc_stack_starting_size_bytes"); got != 16384 {
		t.Fatalf("starting stack %.0f, want 16384", got)
	}
	if got := counterOf(page, "go_goroutines"); got != 2286 {
		t.Fatalf("goroutines %.0f, want 2286", got)
	}
}
