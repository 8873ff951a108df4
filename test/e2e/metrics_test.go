package e2e

import (
	"fmt"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape reads the suite's operator's metrics as Prometheus does, from
// its endpoint: the specs run in processes beside the one that runs it.
func scrape() map[string]*dto.MetricFamily {
	resp, err := http.Get(metricsURL) //nolint:noctx // a loopback read bounded by the test's timeout
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	Expect(resp.StatusCode).To(Equal(http.StatusOK), "GET %s", metricsURL)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	Expect(err).NotTo(HaveOccurred(), "parse the metrics of %s", metricsURL)
	return families
}

// metricValue is the value of the series of family whose labels include
// every label given, -1 when there is none.
func metricValue(family string, labels map[string]string) float64 {
	f, ok := scrape()[family]
	if !ok {
		return -1
	}
	for _, m := range f.GetMetric() {
		if hasLabels(m, labels) {
			switch {
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			default:
				Fail(fmt.Sprintf("%s is neither a gauge nor a counter", family))
			}
		}
	}
	return -1
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	found := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			found++
		}
	}
	return found == len(want)
}
