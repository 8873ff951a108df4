package plugin

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current output")

// run runs the command line as kubectl would, with no kubeconfig.
func run(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	var out, errOut bytes.Buffer
	code = Main(args, genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut})
	return out.String(), errOut.String(), code
}

// golden compares got with testdata/golden/name, or rewrites it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run go test -update to create it): %v", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run go test ./internal/plugin -update and review the diff):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// The plan of each seed incident, on a snapshot of the cluster it
// happened on, gives the operator's answer.
func TestPlanGolden(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		code     int
		contains []string
	}{
		// The migration would wait for its capacity: Warn, which fails
		// the plan only from --fail-on Warn.
		{"plan-000.txt", []string{"plan", "-f", "testdata/000/migration.yaml", "--snapshot", "testdata/000/cluster", "--fail-on", "Warn"}, ExitHazards,
			[]string{"1/2", "InsufficientCapacity", "have 1 of 2 qualifying nodes (role=data)"}},
		{"plan-000-provision.txt", []string{"plan", "-f", "testdata/000/migration-provision.yaml", "--snapshot", "testdata/000/cluster"}, ExitOK,
			[]string{"It would ask the autoscaler (mode CapacityBuffer) for 1 node(s) with 1 placeholder pod(s)"}},
		{"plan-001.txt", []string{"plan", "-f", "testdata/001/migration.yaml", "--snapshot", "testdata/001/cluster"}, ExitHazards,
			[]string{"RolloutDeadlock", "Fix: set spec.strategy.rollingUpdate.maxUnavailable to at least 1", "Soft   3/3       yes"}},
		{"plan-001.json", []string{"plan", "-f", "testdata/001/migration.yaml", "--snapshot", "testdata/001/cluster", "-o", "json"}, ExitHazards,
			[]string{`"type": "RolloutDeadlock"`, `"severity": "Blocking"`, `"completes": false`}},
		{"plan-002.txt", []string{"plan", "-f", "testdata/002/migration.yaml", "--snapshot", "testdata/002/cluster"}, ExitHazards,
			[]string{"SelectorOverlap", "my-app-blue-0, my-app-blue-1", "matchLabelKeys"}},
		{"plan-002-fixed.yaml", []string{"plan", "-f", "testdata/002/migration-fixed.yaml", "--snapshot", "testdata/002/cluster", "-o", "yaml"}, ExitOK,
			[]string{"feasible: true", "recreatesCount: 2"}},
		{"plan-004.txt", []string{"plan", "-f", "testdata/004/migration.yaml", "--snapshot", "testdata/004/cluster"}, ExitOK,
			[]string{"ScheduleAnyway", "Deployment/helm-controller", "Deployment/source-controller", "recreates 1 pod(s)"}},
		{"plan-004-protected.txt", []string{"plan", "-f", "testdata/004/migration-protected.yaml", "--snapshot", "testdata/004/cluster"}, ExitHazards,
			[]string{"block before the Soft stage (ProtectedPodRecreated)", "helm-controller-6b7c-z0k (of Deployment/helm-controller)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := run(t, "", tc.args...)
			if code != tc.code {
				t.Fatalf("exit code %d, want %d; stderr: %s", code, tc.code, errOut)
			}
			for _, s := range tc.contains {
				if !strings.Contains(out, s) {
					t.Errorf("output lacks %q", s)
				}
			}
			golden(t, tc.name, out)
		})
	}
}

// Lint finds seeds 000, 001 and 002 in rendered manifests and passes their
// fixed versions (exit 0), telling as Info what the operator's pre-flight
// tells of a migration making them: seed 001's fix leaves replicas ==
// nodes, so a drain cannot place the evicted pod; seed 002's zone spread
// counts a lost zone.
func TestLintGolden(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		stdin    string
		code     int
		contains []string
	}{
		{"lint-000.txt", []string{"lint", "--snapshot", "testdata/000/cluster", "testdata/000/manifests.yaml"}, "", ExitHazards,
			[]string{"InsufficientCapacity", "Deployment/graphdb"}},
		{"lint-001.txt", []string{"lint", "--nodes", "3", "testdata/001/manifests.yaml"}, "", ExitHazards,
			[]string{"testdata/001/manifests.yaml:29", "RolloutDeadlock"}},
		{"lint-001.github", []string{"lint", "--nodes", "3", "-o", "github", "testdata/001/manifests.yaml"}, "", ExitHazards,
			[]string{"::error file=testdata/001/manifests.yaml,line=29,title=RolloutDeadlock in Deployment/web::"}},
		{"lint-001-fixed.txt", []string{"lint", "--nodes", "3", "testdata/001/manifests-fixed.yaml"}, "", ExitOK,
			[]string{"Info", "EvictedPodUnplaceable", "once the change has rolled out, a drain of node"}},
		{"lint-002.json", []string{"lint", "-o", "json", "testdata/002/manifests.yaml"}, "", ExitHazards,
			[]string{`"type": "SelectorOverlap"`, `"object": "StatefulSet/my-app-blue"`, `"object": "StatefulSet/my-app-green"`}},
		{"lint-002-fixed.json", []string{"lint", "-o", "json", "--snapshot", "testdata/002/cluster", "testdata/002/manifests-fixed.yaml"}, "", ExitOK,
			[]string{`"type": "ZoneLossUnplaceable"`, `"blocking": false`, `"object": "StatefulSet/my-app-green"`}},
		{"lint-spread-all-revisions.txt", []string{"lint", "--nodes", "3", "testdata/lint/spread-all-revisions.yaml"}, "", ExitHazards,
			[]string{"SpreadEndsSkewed", "spread-all-revisions.yaml:12"}},
		{"lint-spread-new-revision.txt", []string{"lint", "--nodes", "3", "-", "testdata/lint/spread-new-revision.yaml"}, "", ExitOK,
			[]string{"Info", "EvictedPodUnplaceable"}},
		{"lint-two-migrations.txt", []string{"lint", "--nodes", "3", "testdata/lint/two-migrations.yaml"}, "", ExitHazards,
			[]string{"TargetClaimed", "PlacementMigration/web-apart-zones", "PlacementMigration web-apart,"}},
		// A template's constraint and a migration of the manifests that
		// writes the same field: each side names the other.
		{"lint-template-and-migration.txt", []string{"lint", "--nodes", "6", "testdata/lint/template-and-migration.yaml"}, "", ExitHazards,
			[]string{"template-and-migration.yaml:15", "TargetClaimed    StatefulSet/ledger: the change writes the pod anti-affinity term lists, which PlacementMigration ledger-racks writes", "AffinityClobber"}},
		// The hard stage's disruption pre-flight, the operator's question.
		{"lint-migration-budget.txt", []string{"lint", "--nodes", "3", "testdata/lint/migration-budget.yaml"}, "", ExitHazards,
			[]string{"DrainBlockedByBudget", "PodDisruptionBudget api has maxUnavailable 0", "guards.disruptions: Block"}},
		// A zone spread is never failed for zones lint did not assume.
		{"lint-zone-spread-no-zones.txt", []string{"lint", "--nodes", "3", "testdata/lint/zone-spread.yaml"}, "", ExitOK,
			[]string{"No placement hazards found."}},
		{"lint-zone-spread.txt", []string{"lint", "--nodes", "6", "--zones", "a,b,c", "testdata/lint/zone-spread.yaml"}, "", ExitOK,
			[]string{"Info", "ZoneLossUnplaceable", "nodeTaintsPolicy Honor"}},
		{"lint-zone-spread-four-domains.txt", []string{"lint", "--nodes", "6", "--zones", "a,b,c", "testdata/lint/zone-spread-four-domains.yaml"}, "", ExitHazards,
			[]string{"InsufficientCapacity", "3 of 4"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := run(t, tc.stdin, tc.args...)
			if code != tc.code {
				t.Fatalf("exit code %d, want %d; stdout: %s stderr: %s", code, tc.code, out, errOut)
			}
			for _, s := range tc.contains {
				if !strings.Contains(out, s) {
					t.Errorf("output lacks %q:\n%s", s, out)
				}
			}
			golden(t, tc.name, out)
		})
	}
}
