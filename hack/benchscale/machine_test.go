package main

import "testing"

func TestParseCPULineSumsBusyAndIdleAndKeepsSteal(t *testing.T) {
	got, ok := parseCPULine("cpu1 796685 22280 197189 5464272 20588 0 20068 3498 0 0")
	if !ok {
		t.Fatal("a cpuN line was not read")
	}
	want := cpuTimes{busy: 796685 + 22280 + 197189 + 0 + 20068, idle: 5464272 + 20588, steal: 3498}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestParseCPULineSkipsTheWholeMachineAndOtherLines(t *testing.T) {
	for _, line := range []string{
		"cpu  4481245 48447 594044 7830914 26532 0 72590 7040 0 0",
		"intr 123 4 5",
		"ctxt 99",
		"cpu0 1 2 3",
	} {
		if _, ok := parseCPULine(line); ok {
			t.Errorf("%q was read as a CPU", line)
		}
	}
}

func TestMachineTimesSinceIsPerCPU(t *testing.T) {
	before := machineTimes{{busy: 10, idle: 100, steal: 1}, {busy: 20, idle: 200, steal: 2}}
	after := machineTimes{{busy: 15, idle: 190, steal: 1}, {busy: 120, idle: 200, steal: 7}}
	got := after.since(before)
	want := machineTimes{{busy: 5, idle: 90, steal: 0}, {busy: 100, idle: 0, steal: 5}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if after.since(nil) != nil || after.since(machineTimes{{}}) != nil {
		t.Fatal("readings that do not match gave a difference")
	}
}
