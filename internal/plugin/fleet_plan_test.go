package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/placement-guard/placement-guard/internal/fleet"
)

// secondDataNode is seed 000's missing node: with it the graph DB can
// leave the search engine's node.
const secondDataNode = `apiVersion: v1
kind: Node
metadata:
  name: data-2
  labels: {kubernetes.io/hostname: data-2, role: data}
status:
  allocatable: {cpu: "8", memory: 32Gi, pods: "110"}
  conditions: [{type: Ready, status: "True"}]
`

// seedFleet is a directory of three snapshots of seed 000's cluster: as it
// was (one data node, the graph DB not Ready), with the second data node
// and the graph DB Ready, and one whose graph DB is gone.
func seedFleet(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	base, err := os.ReadFile("testdata/000/cluster/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	write := func(cluster, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, cluster), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, cluster, "cluster.yaml"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("eu-one-data-node", string(base))
	var ready, kept []string
	for _, doc := range strings.Split(string(base), "\n---\n") {
		if strings.Contains(doc, "name: graphdb-6b7c-q1x") {
			doc = strings.Replace(doc, "status: {phase: Running}", `status: {phase: Running, conditions: [{type: Ready, status: "True"}]}`, 1)
		}
		ready = append(ready, doc)
		if !strings.Contains(doc, "name: graphdb") {
			kept = append(kept, doc)
		}
	}
	// Once the second node exists the graph DB, Pending until then, runs.
	write("us-two-data-nodes", strings.Join(ready, "\n---\n")+"\n---\n"+secondDataNode)
	write("ap-no-graphdb", strings.Join(kept, "\n---\n"))
	return dir
}

// Across a fleet of snapshots, plan gives one row per cluster with the
// operator's outcome there, the same as plan on that cluster alone; the
// exit code is the worst row against --fail-on.
func TestFleetPlanOnSnapshots(t *testing.T) {
	dir := seedFleet(t)
	out, stderr, code := run(t, "", "plan", "-f", "testdata/000/migration.yaml", "--snapshot-dir", dir, "-o", "json")
	if code != ExitHazards {
		t.Fatalf("exit %d, want %d (a cluster lacks the graph DB: Blocked); stderr %s", code, ExitHazards, stderr)
	}
	var plan FleetPlan
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := map[string]struct {
		level   fleet.Level
		outcome string
	}{
		"ap-no-graphdb":     {fleet.Blocked, "Blocked"},
		"eu-one-data-node":  {fleet.Warn, "WaitingForCapacity"},
		"us-two-data-nodes": {fleet.OK, "Proceeds"},
	}
	if len(plan.Rows) != len(want) {
		t.Fatalf("%d rows, want %d: %s", len(plan.Rows), len(want), out)
	}
	for i, r := range plan.Rows {
		w := want[r.Cluster]
		if r.Level != w.level || r.Outcome != w.outcome || r.Migration != "graphdb-apart-from-search" || r.Namespace != "db" {
			t.Errorf("row %d %s: %s %s %s/%s, want %s %s", i, r.Cluster, r.Level, r.Outcome, r.Namespace, r.Migration, w.level, w.outcome)
		}
		// The row sums up what plan says on that cluster alone.
		single, _, _ := run(t, "", "plan", "-f", "testdata/000/migration.yaml", "--snapshot", filepath.Join(dir, r.Cluster), "-o", "json")
		var rep Report
		if err := json.Unmarshal([]byte(single), &rep); err != nil {
			t.Fatalf("%s: %v", r.Cluster, err)
		}
		alone := fleetRow(rep)
		alone.Cluster = r.Cluster
		got, _ := json.Marshal(r)
		wantRow, _ := json.Marshal(alone)
		if string(got) != string(wantRow) {
			t.Errorf("%s: the fleet's row\n%s\nis not plan's on the cluster alone\n%s", r.Cluster, got, wantRow)
		}
	}
	if plan.Worst != fleet.Blocked {
		t.Errorf("worst %s", plan.Worst)
	}
	eu := plan.Rows[1]
	if eu.Capacity != "1/2" || eu.Hazard == nil || !strings.Contains(eu.Reason, "Capacity") {
		t.Errorf("the one-data-node cluster says what it lacks: capacity %q, reason %q, hazard %+v", eu.Capacity, eu.Reason, eu.Hazard)
	}
	us := plan.Rows[2]
	if len(us.Recreates) != 2 || us.Recreates[0].Pods == 0 {
		t.Errorf("the two-data-node cluster recreates pods at each stage: %+v", us.Recreates)
	}
}

// --fail-on sets the level the fleet fails from; the table and GitHub's
// annotations carry every row.
func TestFleetPlanThresholdAndFormats(t *testing.T) {
	dir := seedFleet(t)
	if err := os.RemoveAll(filepath.Join(dir, "ap-no-graphdb")); err != nil {
		t.Fatal(err)
	}
	out, _, code := run(t, "", "plan", "-f", "testdata/000/migration.yaml", "--snapshot-dir", dir)
	if code != ExitOK {
		t.Errorf("a cluster that waits for capacity fails only from Warn: exit %d\n%s", code, out)
	}
	if !hasRow(out, "eu-one-data-node", "None", "db/graphdb-apart-from-search", "Warn", "WaitingForCapacity", "1/2") ||
		!hasRow(out, "us-two-data-nodes", "None", "db/graphdb-apart-from-search", "OK", "Proceeds", "2/2") ||
		!strings.Contains(out, "Worst: Warn") {
		t.Errorf("table:\n%s", out)
	}
	out, _, code = run(t, "", "plan", "-f", "testdata/000/migration.yaml", "--snapshot-dir", dir, "--fail-on", "Warn", "-o", "github")
	if code != ExitHazards {
		t.Errorf("--fail-on Warn: exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "::warning title=eu-one-data-node%3A db/graphdb-apart-from-search WaitingForCapacity::") ||
		!strings.HasPrefix(lines[1], "::notice title=us-two-data-nodes%3A db/graphdb-apart-from-search Proceeds::") {
		t.Errorf("annotations:\n%s", out)
	}
}

// A fleet named two ways, a bad --fail-on or a fleet directory without a
// cluster is a usage error; a snapshot that does not parse is its row.
func TestFleetPlanBadInput(t *testing.T) {
	dir := seedFleet(t)
	if err := os.WriteFile(filepath.Join(dir, "eu-one-data-node", "broken.yaml"), []byte("kind: Pod\nmetadata: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--snapshot-dir", dir, "--all-contexts"}, "name the fleet one way"},
		{[]string{"--snapshot-dir", dir, "--fail-on", "Never"}, "--fail-on must be Blocked or Warn"},
		{[]string{"--snapshot-dir", t.TempDir()}, "holds no snapshot directory"},
		{[]string{"--snapshot-dir", dir, "--snapshot", dir}, "--snapshot-dir for a fleet"},
		{[]string{"--snapshot-dir", dir, "-o", "tree"}, `unknown output format "tree"`},
	} {
		_, stderr, code := run(t, "", append([]string{"plan", "-f", "testdata/000/migration.yaml"}, tc.args...)...)
		if code != ExitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %s; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	out, _, code := run(t, "", "plan", "-f", "testdata/000/migration.yaml", "--snapshot-dir", dir, "-o", "json")
	var plan FleetPlan
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	if code != ExitHazards || plan.Rows[1].Cluster != "eu-one-data-node" || plan.Rows[1].Level != fleet.Unknown || !strings.Contains(plan.Rows[1].Error, "broken.yaml") ||
		plan.Rows[2].Level != fleet.OK {
		t.Errorf("exit %d, rows %+v", code, plan.Rows)
	}
}

// lint across a fleet of snapshots gives each cluster the findings lint
// gives against that snapshot alone.
func TestFleetLintOnSnapshots(t *testing.T) {
	dir := seedFleet(t)
	out, stderr, code := run(t, "", "lint", "--snapshot-dir", dir, "-o", "json", "testdata/000/manifests.yaml")
	if code != ExitHazards {
		t.Fatalf("exit %d (the one-data-node cluster lacks capacity); %s", code, stderr)
	}
	var fl FleetLint
	if err := json.Unmarshal([]byte(out), &fl); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	levels := map[string]fleet.Level{"ap-no-graphdb": fleet.Blocked, "eu-one-data-node": fleet.Blocked, "us-two-data-nodes": fleet.Warn}
	if len(fl.Rows) != 3 || fl.Worst != fleet.Blocked {
		t.Fatalf("rows %+v", fl)
	}
	for _, r := range fl.Rows {
		alone, _, _ := run(t, "", "lint", "--snapshot", filepath.Join(dir, r.Cluster), "-o", "json", "testdata/000/manifests.yaml")
		var want []Finding
		if err := json.Unmarshal([]byte(alone), &want); err != nil {
			t.Fatal(err)
		}
		if mustJSON(t, r.Findings) != mustJSON(t, want) {
			t.Errorf("%s: fleet findings\n%s\nalone\n%s", r.Cluster, mustJSON(t, r.Findings), mustJSON(t, want))
		}
		if r.Level != levels[r.Cluster] {
			t.Errorf("%s: level %s, want %s", r.Cluster, r.Level, levels[r.Cluster])
		}
	}
	if !strings.Contains(fl.Rows[1].Findings[0].Type, "InsufficientCapacity") {
		t.Errorf("eu: %+v", fl.Rows[1].Findings)
	}
}
