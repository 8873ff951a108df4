package main

import (
	"strings"
	"testing"
	"time"
)

// A page of the manager's metrics as Prometheus' text format writes it:
// two series of the check's histogram, a family sharing its prefix, and
// labelled counters.
const metricsPage = `# HELP placementguard_admission_duration_seconds The check's time.
# TYPE placementguard_admission_duration_seconds histogram
placementguard_admission_duration_seconds_bucket{allowed="true",mode="Warn",le="5e-05"} 10
placementguard_admission_duration_seconds_bucket{allowed="true",mode="Warn",le="0.001"} 30
placementguard_admission_duration_seconds_bucket{allowed="true",mode="Warn",le="0.010000000000000002"} 39
placementguard_admission_duration_seconds_bucket{allowed="true",mode="Warn",le="+Inf"} 40
placementguard_admission_duration_seconds_sum{allowed="true",mode="Warn"} 0.2
placementguard_admission_duration_seconds_count{allowed="true",mode="Warn"} 40
placementguard_admission_duration_seconds_bucket{allowed="false",mode="Deny",le="5e-05"} 0
placementguard_admission_duration_seconds_bucket{allowed="false",mode="Deny",le="0.001"} 5
placementguard_admission_duration_seconds_bucket{allowed="false",mode="Deny",le="0.010000000000000002"} 10
placementguard_admission_duration_seconds_bucket{allowed="false",mode="Deny",le="+Inf"} 10
placementguard_admission_duration_seconds_total_bucket{allowed="true",mode="Warn",le="+Inf"} 999
rest_client_requests_total{code="200",method="GET"} 12
rest_client_requests_total{code="200",method="PATCH"} 3
rest_client_requests_total{code="409",method="PATCH"} 1
`

// The check's histogram is read series by series, its +Inf bucket as the
// count, and a family that only shares its name's prefix is left out.
func TestHistogramsAreReadSeriesBySeries(t *testing.T) {
	hs := admissionHistograms(metricsPage)
	if len(hs) != 2 {
		t.Fatalf("%d series, want 2: %+v", len(hs), hs)
	}
	warn, deny := hs[0], hs[1]
	if warn.count != 40 || warn.atMost[0.001] != 30 || deny.count != 10 || deny.atMost[5e-05] != 0 {
		t.Fatalf("warn %+v, deny %+v", warn, deny)
	}
	if warn.describe() != "judged, admitted" || deny.describe() != "judged, refused" {
		t.Errorf("described as %q and %q", warn.describe(), deny.describe())
	}
	// 0.01 is printed as 0.010000000000000002 by exponential buckets.
	if got := warn.shareWithin(0.01); got != "97.50%" {
		t.Errorf("within 10 ms: %s, want 97.50%%", got)
	}
	if got := warn.shareWithin(0.005); got != "-" {
		t.Errorf("a bound the histogram lacks: %s, want -", got)
	}
}

// Series are summed over the labels asked for, and a later reading less
// an earlier one is what happened in between.
func TestHistogramsAddAndSubtract(t *testing.T) {
	hs := admissionHistograms(metricsPage)
	all := sumOf(hs)
	if all.count != 50 || all.atMost[0.001] != 35 {
		t.Fatalf("sum of every series: %+v", all)
	}
	if deny := sumOf(hs, `mode="Deny"`); deny.count != 10 {
		t.Fatalf("sum of Deny: %+v", deny)
	}
	earlier := histogram{count: 20, atMost: map[float64]float64{0.001: 15}}
	if d := all.minus(earlier); d.count != 30 || d.atMost[0.001] != 20 {
		t.Fatalf("difference %+v", d)
	}
}

// Labelled counters are read by their labels.
func TestCountersAreReadByTheirLabels(t *testing.T) {
	got := countersOf(metricsPage, "rest_client_requests_total")
	if got[`code="200",method="PATCH"`] != 3 || got[`code="409",method="PATCH"`] != 1 || len(got) != 3 {
		t.Fatalf("counters %v", got)
	}
	if counterOf(metricsPage, "rest_client_requests_total") != 0 {
		t.Error("a labelled family read as an unlabelled sample")
	}
}

// Percentiles are taken by nearest rank: the median of four is the
// second, p99 of a hundred the 99th, and 100 the largest.
func TestQuantilesByNearestRank(t *testing.T) {
	four := []time.Duration{4, 1, 3, 2}
	if got := quantile(four, 50); got != 2 {
		t.Errorf("p50 of 1..4: %d, want 2", got)
	}
	if got := quantile(four, 100); got != 4 {
		t.Errorf("max of 1..4: %d, want 4", got)
	}
	var hundred []time.Duration
	for i := 100; i >= 1; i-- {
		hundred = append(hundred, time.Duration(i)*time.Millisecond)
	}
	if got := quantile(hundred, 99); got != 99*time.Millisecond {
		t.Errorf("p99 of 1..100 ms: %s, want 99ms", got)
	}
	if got := quantile(nil, 50); got != 0 {
		t.Errorf("of nothing: %s", got)
	}
	if four[0] != 4 {
		t.Error("quantile sorted its caller's slice")
	}
	report := latencyMarkdown(hundred)
	if !strings.Contains(report, "100 migrations: p50 50ms, p99 99ms, max 100ms") {
		t.Errorf("latency report: %q", report)
	}
}

// The manager's memory is read from the heap profile's statistics and the
// kernel's resident set, and reported per pod.
func TestMemoryIsReadAndReportedPerPod(t *testing.T) {
	heap := "heap profile: 1: 2 [3: 4] @ heap/1048576\n# runtime.MemStats\n# Alloc = 1\n# HeapAlloc = 52428800\n# HeapInuse = 62914560\n"
	status := "Name:\tmanager\nVmPeak:\t  999 kB\nVmHWM:\t  307200 kB\nVmRSS:\t  102400 kB\n"
	m := memoryOf(heap, status)
	if m.live != 50<<20 || m.inUse != 60<<20 || m.rss != 100<<20 || m.peakRSS != 300<<20 {
		t.Fatalf("memory %+v", m)
	}
	r := results{options: options{pods: 1024}, base: started{memory: memory{live: 10 << 20}}, loaded: started{memory: m}}
	report := r.markdown()
	if !strings.Contains(report, "| live heap | 10.0 MiB | 50.0 MiB | 40.00 KiB |") || !strings.Contains(report, "| highest RSS since start (VmHWM) | 0.0 MiB | 300.0 MiB | |") {
		t.Errorf("report:\n%s", report)
	}
}

// The manager's request counters are summed by name, by method and by
// code: the conflicts of a run are the 409s of every method.
func TestCountersSumByMethodAndCode(t *testing.T) {
	got := countersIn(metricsPage+"rest_client_requests_total{code=\"409\",method=\"PUT\"} 2\n", "rest_client_requests_total")
	want := map[string]float64{
		"rest_client_requests_total": 18, "rest_client_requests_total/GET": 12, "rest_client_requests_total/PATCH": 4,
		"rest_client_requests_total/PUT": 2, "rest_client_requests_total/200": 15, "rest_client_requests_total/409": 3,
	}
	if len(got) != len(want) {
		t.Fatalf("counters %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

// A migration's writes are reported as their mean, least and most.
func TestWritesReportMeanMinAndMax(t *testing.T) {
	w := writes{status: []int{4, 6, 5}, other: []int{1, 1, 1}, deployment: []int{2, 2, 2}, conflicts: 0}
	md := w.markdown()
	for _, want := range []string{"Writes of 3 migrations", "| status writes | 5.0 | 4 | 6 |", "| writes to its Deployment's spec | 2.0 | 2 | 2 |", "409 (conflict), in all | 0 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	w.about = gatedAbout
	if md := w.markdown(); !strings.Contains(md, "Writes of 3 capacity-gated migrations (") || !strings.Contains(md, "to Succeeded:") {
		t.Errorf("the capacity-gated migrations' writes are not said to be theirs:\n%s", md)
	}
}
