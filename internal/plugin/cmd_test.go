package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// Mistakes in the command line or the input exit 2 with a message that
// says what is wrong, and print no report.
func TestUsageErrorsExitTwo(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken.yaml")
	if err := os.WriteFile(broken, []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: [unclosed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	unknownPlugin := filepath.Join(dir, "scheduler.yaml")
	if err := os.WriteFile(unknownPlugin, []byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- plugins:\n    score:\n      enabled: [{name: Coscheduling}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown output", []string{"plan", "-f", "testdata/001/migration.yaml", "--snapshot", "testdata/001/cluster", "-o", "wide"}, `unknown output format "wide"`},
		{"no migration", []string{"plan", "--snapshot", "testdata/001/cluster"}, "name the workloads with --target"},
		{"file and flags", []string{"plan", "-f", "testdata/001/migration.yaml", "--spread-key", "zone"}, "either -f or the constraint flags"},
		{"file and stage", []string{"plan", "-f", "testdata/001/migration.yaml", "--final-stage", "Soft"}, "(--final-stage)"},
		{"missing file", []string{"plan", "-f", filepath.Join(dir, "nope.yaml"), "--snapshot", "testdata/001/cluster"}, "no such file"},
		{"no constraint", []string{"plan", "--target", "deploy/web", "--snapshot", "testdata/001/cluster"}, "--anti-affinity-key KEY or --spread-key KEY"},
		{"both constraints", []string{"plan", "--target", "deploy/web", "--anti-affinity-key", "a", "--spread-key", "b"}, "not both"},
		{"bad kind", []string{"plan", "--target", "pod/web", "--anti-affinity-key", "a"}, "targets Deployments"},
		{"bad selector", []string{"plan", "--target", "deploy/web", "--anti-affinity-key", "a", "--selector", "app in (("}, "--selector"},
		{"bad stage", []string{"plan", "--target", "deploy/web", "--anti-affinity-key", "a", "--final-stage", "Firm"}, "Soft or Hard"},
		{"malformed yaml", []string{"lint", broken}, broken + ":1"},
		{"not a migration", []string{"plan", "-f", "testdata/001/manifests.yaml", "--snapshot", "testdata/001/cluster"}, "holds no PlacementMigration"},
		{"empty snapshot", []string{"plan", "-f", "testdata/001/migration.yaml", "--snapshot", empty}, "holds no .yaml"},
		{"lint nothing", []string{"lint"}, "name the manifests"},
		{"lint negative nodes", []string{"lint", "--nodes", "-1", "testdata/001/manifests.yaml"}, "must not be negative"},
		{"lint nodes and snapshot", []string{"lint", "--nodes", "3", "--snapshot", "testdata/001/cluster", "testdata/001/manifests.yaml"}, "one of --nodes, --snapshot, --live or a fleet"},
		{"scheduler config of an unknown plugin", []string{"plan", "-f", "testdata/001/migration.yaml", "--snapshot", "testdata/001/cluster", "--scheduler-config", unknownPlugin}, "plugin Coscheduling is not one the engine scores with"},
		{"scheduler config missing", []string{"plan", "-f", "testdata/001/migration.yaml", "--snapshot", "testdata/001/cluster", "--scheduler-config", filepath.Join(dir, "none.yaml")}, "--scheduler-config: open"},
		{"scheduler profile missing", []string{"plan", "-f", "testdata/001/migration.yaml", "--snapshot", "testdata/001/cluster", "--scheduler-config", unknownPlugin, "--scheduler-name", "packer"}, `no profile "packer"`},
		{"no cluster", []string{"plan", "-f", "testdata/001/migration.yaml", "--request-timeout", "5s"}, "list nodes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := run(t, "", tc.args...)
			if code != ExitUsage {
				t.Fatalf("exit code %d, want %d; stdout %q stderr %q", code, ExitUsage, out, errOut)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr %q lacks %q", errOut, tc.want)
			}
			if out != "" {
				t.Errorf("a usage error printed a report: %q", out)
			}
		})
	}
}

// The flags describe the same migration as its manifest: the plans agree.
func TestPlanFromFlagsMatchesTheManifest(t *testing.T) {
	fromFile, _, code := run(t, "", "plan", "-f", "testdata/000/migration.yaml", "--snapshot", "testdata/000/cluster", "-o", "json")
	if code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	fromFlags, errOut, code := run(t, "", "plan", "-n", "db", "--target", "deploy/graphdb", "--anti-affinity-key", "kubernetes.io/hostname",
		"--selector", "app=search", "--node-selector", "role=data", "--min-nodes", "2", "--snapshot", "testdata/000/cluster", "-o", "json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var a, b Report
	if err := json.Unmarshal([]byte(fromFile), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(fromFlags), &b); err != nil {
		t.Fatal(err)
	}
	a.Migration, b.Migration = "", ""
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Fatalf("plans differ:\nfile:  %s\nflags: %s", ja, jb)
	}
}

// A target that does not exist is reported, and fails the plan.
func TestPlanReportsMissingTargets(t *testing.T) {
	out, _, code := run(t, "", "plan", "-n", "shop", "--target", "deploy/web", "--target", "sts/nope",
		"--anti-affinity-key", "kubernetes.io/hostname", "--final-stage", "Soft", "--snapshot", "testdata/001/cluster")
	if code != ExitHazards {
		t.Fatalf("exit %d, want %d", code, ExitHazards)
	}
	if !strings.Contains(out, "Target not found: StatefulSet/nope") || !strings.Contains(out, "Deployment/web: adds a preferred") {
		t.Fatalf("output:\n%s", out)
	}
	out, _, code = run(t, "", "plan", "-n", "shop", "--target-selector", "team=none", "--anti-affinity-key", "kubernetes.io/hostname", "--snapshot", "testdata/001/cluster")
	if code != ExitHazards || !strings.Contains(out, "selects no workload in namespace shop") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
}

// Lint reads standard input, and a migration among the manifests is
// judged against the workloads it targets: one that would replace the
// workload's own anti-affinity terms is reported (seed 004's lesson).
func TestLintMigrationThatWouldClobber(t *testing.T) {
	manifests := `apiVersion: apps/v1
kind: Deployment
metadata: {name: source-controller, namespace: flux-system, labels: {app.kubernetes.io/part-of: flux}}
spec:
  replicas: 1
  selector: {matchLabels: {app: source-controller}}
  template:
    metadata: {labels: {app: source-controller, app.kubernetes.io/part-of: flux}}
    spec:
      affinity:
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
          - weight: 50
            podAffinityTerm: {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: ingress}}}
      containers: [{name: manager, image: source-controller:1}]
---
apiVersion: placementguard.io/v1alpha1
kind: PlacementMigration
metadata: {name: flux-apart, namespace: flux-system}
spec:
  targetSelector:
    selector: {matchLabels: {app.kubernetes.io/part-of: flux}}
  constraint:
    podAntiAffinity:
      topologyKey: kubernetes.io/hostname
      labelSelector: {matchLabels: {app.kubernetes.io/part-of: flux}}
  finalStage: Soft
`
	out, errOut, code := run(t, manifests, "lint", "-o", "json", "-")
	if code != ExitHazards {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	var fs []Finding
	if err := json.Unmarshal([]byte(out), &fs); err != nil {
		t.Fatal(err)
	}
	if len(fs) != 1 || fs[0].Type != "AffinityClobber" || fs[0].Object != "PlacementMigration/flux-apart" || fs[0].File != "-" || fs[0].Line != 17 {
		t.Fatalf("findings: %+v", fs)
	}
}

// Shell completion is served for the output formats.
func TestCompletion(t *testing.T) {
	out, _, code := run(t, "", "__complete", "plan", "--output", "")
	if code != ExitOK || !strings.Contains(out, "table\nyaml\njson\n") {
		t.Fatalf("exit %d, completions %q", code, out)
	}
	out, _, code = run(t, "", "completion", "bash")
	if code != ExitOK || !strings.Contains(out, "kubectl-placement") {
		t.Fatalf("exit %d, bash completion script missing", code)
	}
}

// A pod the engine cannot index (its selector does not parse) is skipped
// with a warning; the plan is still given, as the operator would give it.
func TestPlanSkipsWhatItCannotIndex(t *testing.T) {
	out, errOut, code := run(t, "", "plan", "-f", "testdata/001/migration.yaml", "--snapshot", "testdata/hostile/cluster")
	if code != ExitHazards || !strings.Contains(out, "RolloutDeadlock") {
		t.Fatalf("exit %d, output:\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "warning: skipped") || !strings.Contains(errOut, "other/broken") || !strings.Contains(errOut, "Bogus") {
		t.Fatalf("stderr %q does not name the skipped pod and why", errOut)
	}
}

// plan asks what the operator asks: another migration that holds the
// field this one would write blocks it, named; a compatible one is judged
// with its constraint in place.
func TestPlanNamesTheMigrationThatHoldsTheField(t *testing.T) {
	out, errOut, code := run(t, "", "plan", "-f", "testdata/claimed/migration.yaml", "--snapshot", "testdata/claimed/cluster", "-o", "json")
	if code != ExitHazards {
		t.Fatalf("exit %d, want %d: %s %s", code, ExitHazards, out, errOut)
	}
	var report Report
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatal(err)
	}
	for _, s := range report.Stages {
		if len(s.Hazards) != 1 || s.Hazards[0].Type != pgv1.ReasonTargetClaimed || !strings.Contains(s.Hazards[0].Message, "PlacementMigration web-zones,") {
			t.Fatalf("stage %s: want TargetClaimed naming web-zones, got %+v", s.Stage, s.Hazards)
		}
	}
	out, errOut, code = run(t, "", "plan", "-f", "testdata/claimed/migration-compatible.yaml", "--snapshot", "testdata/claimed/cluster")
	if strings.Contains(out, pgv1.ReasonTargetClaimed) {
		t.Fatalf("a spread on another key shares the workload: exit %d\n%s%s", code, out, errOut)
	}
}

// plan lists the moves mode Evict would make, asking before each what the
// operator asks (planning.NextMove) on the cluster as the moves before it
// leave it: a soft zone spread 3/3/0 whose zone c has nodes now takes two.
// It shows the deletion costs the mode keeps too (planning.Rankings).
func TestPlanListsTheMovesOfModeEvict(t *testing.T) {
	out, errOut, code := run(t, "", "plan", "-f", "testdata/rebalance/migration.yaml", "--snapshot", "testdata/rebalance/cluster", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	var report Report
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatal(err)
	}
	if len(report.Moves) != 2 || report.Moves[0].From == report.Moves[1].From {
		t.Fatalf("want one move from each crowded zone, got %+v", report.Moves)
	}
	for _, m := range report.Moves {
		if m.To != "zone-c" || m.Target != "Deployment/web" {
			t.Errorf("move %+v: want to zone-c", m)
		}
	}
	if len(report.MovesNote) != 1 || !strings.Contains(report.MovesNote[0], "zone-a=2, zone-b=2, zone-c=2") {
		t.Errorf("the moves end even: %q", report.MovesNote)
	}
	// Evict keeps deletion costs too: the crowded zones' pods are ranked,
	// the first of each zone kept longest.
	if c := report.Costs; c == nil || len(c.Writes) != 6 || !strings.Contains(c.Summary, "deletion costs rank 6 pod(s)") {
		t.Fatalf("deletion costs %+v", report.Costs)
	}
	if w := report.Costs.Writes[2]; w.Pod != "web-7d9f-a2" || w.Cost == nil || *w.Cost != -2 {
		t.Errorf("the third write %+v, want web-7d9f-a2 ranked -2", w)
	}
	out, _, _ = run(t, "", "plan", "-f", "testdata/rebalance/migration.yaml", "--snapshot", "testdata/rebalance/cluster")
	if !strings.Contains(out, "move web-7d9f-b2 of Deployment/web from zone-b to zone-c") || !strings.Contains(out, "web-7d9f-a1: pod-deletion-cost -1") {
		t.Errorf("the table lacks the first move or a cost:\n%s", out)
	}
}

// --scheduler-config predicts with the cluster's own profile: a bin-packing
// profile puts the soft stage's new pods where MostAllocated scores best,
// and the plan says which profile it assumed.
func TestPlanPredictsWithTheClustersProfile(t *testing.T) {
	packing := filepath.Join(t.TempDir(), "scheduler.yaml")
	if err := os.WriteFile(packing, []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: packer
  plugins:
    score:
      disabled: [{name: InterPodAffinity}, {name: PodTopologySpread}]
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: MostAllocated}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := func(extra ...string) Report {
		return planReport(t, append([]string{"plan", "-f", "testdata/001/migration.yaml", "--snapshot", "testdata/001/cluster", "-o", "json"}, extra...)...)
	}
	def, packed := plan(), plan("--scheduler-config", packing, "--scheduler-name", "packer")
	if def.SchedulerProfile != "default-scheduler" || packed.SchedulerProfile != "packer" {
		t.Errorf("profiles said: %q and %q", def.SchedulerProfile, packed.SchedulerProfile)
	}
	spread, stacked := landedOn(def), landedOn(packed)
	if len(stacked) != 3 || stacked[0] != stacked[1] || stacked[1] != stacked[2] {
		t.Errorf("bin-packing without spreading puts the soft stage's pods on one node, got %v", stacked)
	}
	if len(spread) != 3 || spread[0] == spread[1] {
		t.Errorf("the default profile spreads the soft stage's pods by their preferred anti-affinity, got %v", spread)
	}
}

// A configuration with several profiles predicts each target with the one
// its pods name, without --scheduler-name; a pod naming a scheduler the
// configuration does not describe is said to be unpredicted and blocks.
func TestPlanPredictsEachTargetWithItsPodsProfile(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "scheduler.yaml")
	if err := os.WriteFile(config, []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
- schedulerName: packer
  plugins:
    score:
      disabled: [{name: InterPodAffinity}, {name: PodTopologySpread}]
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: MostAllocated}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("testdata/001/cluster/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	plan := func(scheduler string) Report {
		snapshot := filepath.Join(dir, scheduler)
		named := strings.ReplaceAll(string(raw), "    spec:\n      containers:", "    spec:\n      schedulerName: "+scheduler+"\n      containers:")
		if err := os.MkdirAll(snapshot, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(snapshot, "cluster.yaml"), []byte(named), 0o644); err != nil {
			t.Fatal(err)
		}
		return planReport(t, "plan", "-f", "testdata/001/migration.yaml", "--snapshot", snapshot, "--scheduler-config", config, "-o", "json")
	}
	packed, spread := plan("packer"), plan("default-scheduler")
	for _, c := range []struct {
		r    Report
		want string
	}{{packed, "packer"}, {spread, "default-scheduler"}} {
		if c.r.SchedulerProfile != c.want || c.r.Stages[0].Targets[0].SchedulerProfile != c.want {
			t.Errorf("pods naming %s: the plan says %q, its target %q", c.want, c.r.SchedulerProfile, c.r.Stages[0].Targets[0].SchedulerProfile)
		}
	}
	if nodes := landedOn(packed); len(nodes) != 3 || nodes[0] != nodes[1] || nodes[1] != nodes[2] {
		t.Errorf("pods naming packer: bin-packing puts the soft stage's pods on one node, got %v", nodes)
	}
	if nodes := landedOn(spread); len(nodes) != 3 || nodes[0] == nodes[1] {
		t.Errorf("pods naming default-scheduler: spread by their preferred anti-affinity, got %v", nodes)
	}
	unknown := plan("batch")
	var found *pgv1.Hazard
	for i, h := range unknown.Stages[0].Hazards {
		if h.Type == placement.HazardUnknownScheduler {
			found = &unknown.Stages[0].Hazards[i]
		}
	}
	if found == nil || found.Severity != pgv1.SeverityBlocking || unknown.Stages[0].Feasible ||
		!strings.Contains(found.Message, `"batch"`) || !strings.Contains(found.Message, "default-scheduler, packer") {
		t.Errorf("pods naming an undescribed scheduler: hazards %+v", unknown.Stages[0].Hazards)
	}
}

// planReport runs a plan that finds hazards (exit 1) and reads its JSON.
func planReport(t *testing.T, args ...string) Report {
	t.Helper()
	out, errOut, code := run(t, "", args...)
	if code != ExitHazards {
		t.Fatalf("%v: exit %d: %s", args, code, errOut)
	}
	var r Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// landedOn are the nodes the first stage's first target's new pods land
// on, in order.
func landedOn(r Report) []string {
	var nodes []string
	for _, s := range r.Stages[0].Targets[0].Steps {
		if s.Node != "" {
			nodes = append(nodes, s.Node)
		}
	}
	return nodes
}
