package health

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/placement-guard/placement-guard/internal/metrics"
)

var metricName = regexp.MustCompile(`\b(placementguard|kube_placementmigration)_[a-z_]+`)

// Every query of the dashboard must name metrics that exist: the operator's
// own, or those the kube-state-metrics configuration exports.
func TestGrafanaQueriesNameExportedMetrics(t *testing.T) {
	exported := map[string]bool{}
	for _, n := range metrics.Names {
		exported[n] = true
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			exported[n+suffix] = true
		}
	}
	var cfg ksmConfig
	readYAML(t, filepath.Join("..", "..", "config", "kube-state-metrics", "placementmigration.yaml"), &cfg)
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "kube-state-metrics", "placementmigration.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	prefix := regexp.MustCompile(`metricNamePrefix: (\S+)`).FindStringSubmatch(string(raw))
	if prefix == nil {
		t.Fatal("the kube-state-metrics configuration has no metricNamePrefix")
	}
	for _, m := range cfg.Spec.Resources[0].Metrics {
		exported[prefix[1]+"_"+m.Name] = true
	}

	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	raw, err = os.ReadFile(filepath.Join("..", "..", "config", "grafana", "placement-guard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	titles := map[string]bool{}
	for _, p := range dash.Panels {
		titles[p.Title] = true
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			names := metricName.FindAllString(target.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: %q names no placement-guard metric", p.Title, target.Expr)
			}
			for _, n := range names {
				if !exported[n] {
					t.Errorf("panel %q: %s is not exported (query %q)", p.Title, n, target.Expr)
				}
			}
		}
	}
	for _, want := range []string{"Migrations by phase", "Waiting for capacity", "Rollbacks by reason", "Stage duration", "Engine evaluation latency", "Skew of kept constraints"} {
		found := false
		for title := range titles {
			found = found || strings.HasPrefix(title, want)
		}
		if !found {
			t.Errorf("the dashboard has no %q panel", want)
		}
	}
}
