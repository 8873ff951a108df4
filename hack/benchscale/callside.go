package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/pprof/profile"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/placement-guard/placement-guard/internal/webhook"
)

// The path of the stream's updates, read as histograms and counters
// before and after the stream: where the client's wait lies when the
// check's own time does not explain it.
const (
	// apiServerRequest is the API server's time for a whole request: its
	// own work, the call to the check and the check's.
	apiServerRequest = "apiserver_request_duration_seconds"
	// apiServerCall is the API server's time for its call to the check:
	// the connection, TLS, the manager's HTTP server and the check.
	apiServerCall = "apiserver_admission_webhook_admission_duration_seconds"
	// managerHandler is the manager's webhook server's time for a request,
	// its decoding and encoding included.
	managerHandler = "controller_runtime_webhook_latency_seconds"
	// consistencyChecks counts the watch cache's comparisons with etcd.
	consistencyChecks = "apiserver_storage_consistency_checks_total"
)

// callSides are the histograms of the stream's updates at each step of
// their path, and what the API server spent on its CPU and its collector.
type callSides struct {
	// request is the API server's whole time for the dry-run updates of
	// Deployments; apiServer its calls to the check; manager the
	// manager's HTTP handler for them.
	request, apiServer, manager histogram
	// apiServerCPU is the API server's CPU in seconds; apiServerGCs its
	// collector's cycles; apiServerHeap its heap in use, in bytes.
	apiServerCPU, apiServerGCs, apiServerHeap float64
	// requests counts the API server's requests by their labels, and
	// watchEvents the events it sent to watchers by kind: what else it
	// served while the stream ran; consistencyChecks its watch cache's
	// periodic comparisons with etcd (every 5 to 7.5 minutes a resource,
	// a list of every object of it from etcd: at 150,000 pods, hundreds
	// of MiB decoded).
	requests, watchEvents, consistencyChecks map[string]float64
	// startingStack is the stack the API server's runtime gives each new
	// goroutine (go_gc_stack_starting_size_bytes: the average stack of its
	// goroutines at its last collection), and goroutines how many it runs.
	// Every request runs on new goroutines, and one that outgrows its
	// starting stack copies it (runtime.copystack), as decoding a
	// Deployment from etcd does on a 4 KiB start: read before the stream.
	startingStack, goroutines float64
}

// readCallSides reads the path's histograms and counters now.
func readCallSides(ctx context.Context, cfg *rest.Config, managerMetrics string) (callSides, error) {
	raw, err := readAPIServer(ctx, cfg, "/metrics", nil)
	if err != nil {
		return callSides{}, fmt.Errorf("read the API server's metrics: %w", err)
	}
	body, err := get(ctx, managerMetrics)
	if err != nil {
		return callSides{}, fmt.Errorf("read the manager's metrics: %w", err)
	}
	page := string(raw)
	load := loadOf(page)
	return callSides{
		request:           sumOf(histogramsOf(page, apiServerRequest), `dry_run="All"`, `resource="deployments"`, `subresource=""`, `verb="PUT"`),
		apiServer:         sumOf(histogramsOf(page, apiServerCall), `name="workloads.placementguard.io"`),
		manager:           sumOf(histogramsOf(body, managerHandler), fmt.Sprintf(`webhook=%q`, webhook.Path)),
		apiServerCPU:      load.cpu,
		apiServerGCs:      load.gcs,
		apiServerHeap:     counterOf(page, "go_memstats_heap_inuse_bytes"),
		requests:          countersOf(page, "apiserver_request_total"),
		watchEvents:       countersOf(page, "apiserver_watch_events_total"),
		consistencyChecks: countersOf(page, consistencyChecks),
		startingStack:     counterOf(page, "go_gc_stack_starting_size_bytes"),
		goroutines:        counterOf(page, "go_goroutines"),
	}, nil
}

// apiServerLoad is the API server's CPU seconds and collector cycles,
// read at a time.
type apiServerLoad struct {
	cpu, gcs float64
	at       time.Time
}

// readAPIServerLoad reads the API server's load counters now.
func readAPIServerLoad(ctx context.Context, cfg *rest.Config) (apiServerLoad, error) {
	raw, err := readAPIServer(ctx, cfg, "/metrics", nil)
	if err != nil {
		return apiServerLoad{}, fmt.Errorf("read the API server's metrics: %w", err)
	}
	return loadOf(string(raw)), nil
}

// loadOf reads the API server's load counters from its metrics page,
// read now.
func loadOf(page string) apiServerLoad {
	return apiServerLoad{cpu: counterOf(page, "process_cpu_seconds_total"), gcs: counterOf(page, "go_gc_duration_seconds_count"), at: time.Now()}
}

// apiServerStretch is the API server's CPU seconds and collector cycles
// over a stretch of time.
type apiServerStretch struct {
	cpu, gcs float64
	took     time.Duration
}

// since is the API server's load between earlier and l.
func (l apiServerLoad) since(earlier apiServerLoad) apiServerStretch {
	return apiServerStretch{cpu: l.cpu - earlier.cpu, gcs: l.gcs - earlier.gcs, took: l.at.Sub(earlier.at)}
}

// since is what the updates between s and later took.
func (s callSides) since(earlier callSides) callSides {
	return callSides{
		request:           s.request.minus(earlier.request),
		apiServer:         s.apiServer.minus(earlier.apiServer),
		manager:           s.manager.minus(earlier.manager),
		apiServerCPU:      s.apiServerCPU - earlier.apiServerCPU,
		apiServerGCs:      s.apiServerGCs - earlier.apiServerGCs,
		apiServerHeap:     s.apiServerHeap,
		requests:          countsSince(s.requests, earlier.requests),
		watchEvents:       countsSince(s.watchEvents, earlier.watchEvents),
		consistencyChecks: countsSince(s.consistencyChecks, earlier.consistencyChecks),
		startingStack:     earlier.startingStack,
		goroutines:        earlier.goroutines,
	}
}

// countsSince is what each of later's counters gained since earlier,
// the counters that did not move left out.
func countsSince(later, earlier map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for labels, n := range later {
		if d := n - earlier[labels]; d > 0 {
			out[labels] = d
		}
	}
	return out
}

// apiServerCPUProfile writes the API server's CPU profile over d to
// path, if set: what its own work on the stream's updates was.
func apiServerCPUProfile(ctx context.Context, cfg *rest.Config, path string, d time.Duration) error {
	if path == "" {
		return nil
	}
	raw, err := readAPIServer(ctx, cfg, "/debug/pprof/profile", map[string]string{"seconds": strconv.Itoa(int(d.Seconds()))})
	if err != nil {
		return fmt.Errorf("profile the API server: %w", err)
	}
	return os.WriteFile(path, raw, 0o644)
}

// collectAPIServer has the API server run a full collection and waits
// for it, and returns its heap profile as of that collection (the heap
// profile with gc=1 collects before it writes) and how long it took.
// Go's heap profile counts what was allocated up to the last collection,
// so two of these bracket exactly what was allocated between them.
func collectAPIServer(ctx context.Context, cfg *rest.Config) ([]byte, time.Duration, error) {
	began := time.Now()
	raw, err := readAPIServer(ctx, cfg, "/debug/pprof/heap", map[string]string{"gc": "1"})
	if err != nil {
		return nil, 0, fmt.Errorf("collect the API server's garbage: %w", err)
	}
	return raw, time.Since(began), nil
}

// writeAllocsBetween writes to path what the API server allocated
// between two of its heap profiles: after less before.
func writeAllocsBetween(path string, before, after []byte) error {
	b, err := profile.ParseData(before)
	if err != nil {
		return fmt.Errorf("read the API server's heap profile before: %w", err)
	}
	a, err := profile.ParseData(after)
	if err != nil {
		return fmt.Errorf("read the API server's heap profile after: %w", err)
	}
	b.Scale(-1)
	diff, err := profile.Merge([]*profile.Profile{a, b})
	if err != nil {
		return fmt.Errorf("subtract the API server's heap profiles: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return diff.Write(f)
}

// readAPIServer reads one of the API server's own pages, with params.
func readAPIServer(ctx context.Context, cfg *rest.Config, path string, params map[string]string) ([]byte, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	req := cs.Discovery().RESTClient().Get().AbsPath(path)
	for k, v := range params {
		req = req.Param(k, v)
	}
	return req.DoRaw(ctx)
}

// counterOf reads an unlabelled sample from a metrics page, 0 when absent.
func counterOf(body, name string) float64 {
	for _, l := range strings.Split(body, "\n") {
		value, ok := strings.CutPrefix(l, name+" ")
		if !ok {
			continue
		}
		n, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err == nil {
			return n
		}
	}
	return 0
}

// countersOf reads a labelled counter family's samples from a metrics
// page, keyed by their labels.
func countersOf(body, family string) map[string]float64 {
	out := map[string]float64{}
	for _, l := range strings.Split(body, "\n") {
		sample, ok := strings.CutPrefix(l, family+"{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(sample, "} ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
			out[labels] += n
		}
	}
	return out
}

// histogramsOf reads a histogram family's series from a metrics page.
func histogramsOf(body, family string) []histogram {
	line := regexp.MustCompile(`^` + regexp.QuoteMeta(family) + `_bucket\{(.*),?le="([^"]+)"\} (\S+)$`)
	byLabels := map[string]*histogram{}
	var order []string
	for _, l := range strings.Split(body, "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		h, ok := byLabels[m[1]]
		if !ok {
			h = &histogram{labels: m[1], atMost: map[float64]float64{}}
			byLabels[m[1]] = h
			order = append(order, m[1])
		}
		n, _ := strconv.ParseFloat(m[3], 64)
		if m[2] == "+Inf" {
			h.count = n
			continue
		}
		le, _ := strconv.ParseFloat(m[2], 64)
		h.atMost[le] = n
	}
	out := make([]histogram, 0, len(order))
	for _, l := range order {
		out = append(out, *byLabels[l])
	}
	return out
}

// sumOf adds up the series whose labels hold every one of labels.
func sumOf(hs []histogram, labels ...string) histogram {
	out := histogram{labels: strings.Join(labels, ","), atMost: map[float64]float64{}}
	for _, h := range hs {
		if !holdsAll(h.labels, labels) {
			continue
		}
		out.count += h.count
		for le, n := range h.atMost {
			out.atMost[le] += n
		}
	}
	return out
}

// holdsAll says whether a series' labels hold every one of want.
func holdsAll(labels string, want []string) bool {
	for _, w := range want {
		if !strings.Contains(labels, w) {
			return false
		}
	}
	return true
}

// minus is h without the observations of earlier, a reading of the same
// series before.
func (h histogram) minus(earlier histogram) histogram {
	out := histogram{labels: h.labels, count: h.count - earlier.count, atMost: map[float64]float64{}}
	for le, n := range h.atMost {
		out.atMost[le] = n - earlier.atMost[le]
	}
	return out
}

// callSidesMarkdown reports each step's shares within the bounds of any
// histogram ("-" where a histogram has no such bound), and the API
// server's CPU and collector over the stream.
func callSidesMarkdown(s callSides) string {
	bounds := []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5}
	var b strings.Builder
	b.WriteString("\nThe updates' path, step by step (" + apiServerRequest + ", " + apiServerCall + ", " + managerHandler + "):\n\n| step | calls |")
	for _, le := range bounds {
		fmt.Fprintf(&b, " ≤ %g ms |", le*1000)
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(bounds)) + "\n")
	for _, row := range []struct {
		step string
		h    histogram
	}{
		{"API server, the whole request", s.request},
		{"API server, its call to the check", s.apiServer},
		{"manager's HTTP handler", s.manager},
	} {
		fmt.Fprintf(&b, "| %s | %.0f |", row.step, row.h.count)
		for _, le := range bounds {
			fmt.Fprintf(&b, " %s |", row.h.shareWithin(le))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\nThe API server over the stream: %.1f s of CPU; its collector's cycles: %.0f; heap in use after it %.0f MiB.\n", s.apiServerCPU, s.apiServerGCs, s.apiServerHeap/(1<<20))
	fmt.Fprintf(&b, "The API server at the stream's start: %.0f goroutines, each new one started on a %.0f KiB stack (go_gc_stack_starting_size_bytes).\n", s.goroutines, s.startingStack/1024)
	b.WriteString(countsMarkdown("Other requests the API server answered during the stream (apiserver_request_total)", withoutStream(s.requests)))
	b.WriteString(countsMarkdown("Watch events the API server sent during the stream (apiserver_watch_events_total)", s.watchEvents))
	b.WriteString(countsMarkdown("The watch cache's comparisons with etcd during the stream ("+consistencyChecks+")", s.consistencyChecks))
	return b.String()
}

// withoutStream leaves out the stream's own dry-run updates.
func withoutStream(requests map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for labels, n := range requests {
		if !holdsAll(labels, []string{`dry_run="All"`, `resource="deployments"`, `verb="PUT"`}) {
			out[labels] = n
		}
	}
	return out
}

// countsMarkdown lists counts by their labels, the largest first.
func countsMarkdown(title string, counts map[string]float64) string {
	if len(counts) == 0 {
		return "\n" + title + ": none.\n"
	}
	labels := make([]string, 0, len(counts))
	for l := range counts {
		labels = append(labels, l)
	}
	sort.Slice(labels, func(i, j int) bool {
		if counts[labels[i]] != counts[labels[j]] {
			return counts[labels[i]] > counts[labels[j]]
		}
		return labels[i] < labels[j]
	})
	var b strings.Builder
	b.WriteString("\n" + title + ":\n\n| count | labels |\n|---|---|\n")
	for _, l := range labels {
		fmt.Fprintf(&b, "| %.0f | `%s` |\n", counts[l], l)
	}
	return b.String()
}

// shareWithin is the share of h's observations within le seconds, "-"
// when h has no bucket of that bound. Bounds are compared loosely: a
// histogram of exponential buckets prints 0.01 as 0.010000000000000002.
func (h histogram) shareWithin(le float64) string {
	if h.count == 0 {
		return "-"
	}
	for bound, n := range h.atMost {
		if math.Abs(bound-le) <= le*1e-9 {
			return fmt.Sprintf("%.2f%%", 100*n/h.count)
		}
	}
	return "-"
}
