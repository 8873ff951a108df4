package main

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/placement-guard/placement-guard/internal/webhook"
)

// The two ends of the API server's call to the check, read as histograms
// before and after the stream: where the client's wait lies when the
// check's own time does not explain it.
const (
	// apiServerCall is the API server's time for its call to the check:
	// the connection, TLS, the manager's HTTP server and the check.
	apiServerCall = "apiserver_admission_webhook_admission_duration_seconds"
	// managerHandler is the manager's webhook server's time for a request,
	// its decoding and encoding included.
	managerHandler = "controller_runtime_webhook_latency_seconds"
)

// callSides are both ends' histograms of the check's calls.
type callSides struct{ apiServer, manager histogram }

// readCallSides reads both ends' histograms of the check's calls now.
func readCallSides(ctx context.Context, cfg *rest.Config, managerMetrics string) (callSides, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return callSides{}, err
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return callSides{}, fmt.Errorf("read the API server's metrics: %w", err)
	}
	body, err := get(ctx, managerMetrics)
	if err != nil {
		return callSides{}, fmt.Errorf("read the manager's metrics: %w", err)
	}
	return callSides{
		apiServer: sumOf(histogramsOf(string(raw), apiServerCall), `name="workloads.placementguard.io"`),
		manager:   sumOf(histogramsOf(body, managerHandler), fmt.Sprintf(`webhook=%q`, webhook.Path)),
	}, nil
}

// since is what the calls between s and later took.
func (s callSides) since(earlier callSides) callSides {
	return callSides{apiServer: s.apiServer.minus(earlier.apiServer), manager: s.manager.minus(earlier.manager)}
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

// sumOf adds up the series whose labels hold label.
func sumOf(hs []histogram, label string) histogram {
	out := histogram{labels: label, atMost: map[float64]float64{}}
	for _, h := range hs {
		if !strings.Contains(h.labels, label) {
			continue
		}
		out.count += h.count
		for le, n := range h.atMost {
			out.atMost[le] += n
		}
	}
	return out
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

// callSidesMarkdown reports both ends' shares within the bounds of either
// histogram ("-" where a histogram has no such bound).
func callSidesMarkdown(s callSides) string {
	bounds := []float64{0.001, 0.005, 0.01, 0.025, 0.1, 0.5}
	var b strings.Builder
	b.WriteString("\nThe call to the check, from both ends (the API server's " + apiServerCall + " and the manager's " + managerHandler + "):\n\n| end | calls |")
	for _, le := range bounds {
		fmt.Fprintf(&b, " ≤ %g ms |", le*1000)
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(bounds)) + "\n")
	for _, row := range []struct {
		end string
		h   histogram
	}{{"API server", s.apiServer}, {"manager's HTTP handler", s.manager}} {
		fmt.Fprintf(&b, "| %s | %.0f |", row.end, row.h.count)
		for _, le := range bounds {
			fmt.Fprintf(&b, " %s |", row.h.shareWithin(le))
		}
		b.WriteString("\n")
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
