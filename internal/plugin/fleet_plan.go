package plugin

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/fleet"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// FleetPlan is a migration planned across a fleet: one row per cluster and
// migration, and the worst level among them, which sets the exit code.
type FleetPlan struct {
	Rows  []FleetRow  `json:"rows"`
	Worst fleet.Level `json:"worst"`
}

// FleetRow is one cluster's answer about one migration.
type FleetRow struct {
	Cluster string `json:"cluster"`
	// KubernetesVersion is what the cluster's API server reports; empty
	// for a snapshot.
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	Migration         string `json:"migration,omitempty"`
	Namespace         string `json:"namespace,omitempty"`
	// Level ranks the row: OK, Warn (it waits for capacity, or proceeds
	// only to a stage short of the final), Blocked, Unknown (the cluster
	// could not be asked).
	Level fleet.Level `json:"level"`
	// Outcome is the operator's decision before the next stage (Proceeds,
	// WaitingForCapacity, Blocked), Reached when the final stage is
	// verified, Error when the cluster could not be asked.
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
	// Capacity is found/needed for the final stage.
	Capacity string `json:"capacity,omitempty"`
	// Hazard is the first finding that blocks, or else the first of any
	// severity; its message says how to fix it.
	Hazard *pgv1.Hazard `json:"firstHazard,omitempty"`
	// Hazards are what the operator would record in status.hazards with
	// its decision.
	Hazards []pgv1.Hazard `json:"hazards,omitempty"`
	// Recreates are the pods each stage recreates.
	Recreates []StageRecreates `json:"recreates,omitempty"`
	// Request is the capacity the operator would ask its autoscaler for.
	Request *RequestReport `json:"capacityRequest,omitempty"`
	// Error is why the cluster could not be asked.
	Error string `json:"error,omitempty"`
}

// StageRecreates is how many pods a stage's rollouts recreate.
type StageRecreates struct {
	Stage pgv1.Stage `json:"stage"`
	Pods  int        `json:"pods"`
}

// runFleetPlan plans the migrations on every cluster of the fleet.
func runFleetPlan(ctx context.Context, o *Options, f *planFlags, profiles *placement.Profiles) error {
	if err := checkOutput(f.output, outputTable, outputYAML, outputJSON, outputGitHub); err != nil {
		return err
	}
	threshold, err := f.fleet.threshold()
	if err != nil {
		return err
	}
	if f.snapshot != "" {
		return usagef("--snapshot reads one cluster; use --snapshot-dir for a fleet of snapshots")
	}
	results, err := askFleet(ctx, o, &f.fleet, f.fleet.options(), func(m fleet.Member) string { return fleetNamespace(o, m) }, func(ctx context.Context, m fleet.Member) ([]FleetRow, error) {
		return planMember(ctx, o, f, profiles, m)
	})
	if err != nil {
		return err
	}
	plan := fleetPlanOf(results)
	if err := printFleetPlan(o.Out, f.output, plan); err != nil {
		return err
	}
	if fleet.Fails(plan.Worst, threshold) {
		return errHazardsFound
	}
	return nil
}

// planMember plans the migrations on one cluster of the fleet.
func planMember(ctx context.Context, o *Options, f *planFlags, profiles *placement.Profiles, m fleet.Member) ([]FleetRow, error) {
	migrations, err := f.migrations(o, fleetNamespace(o, m))
	if err != nil {
		return nil, err
	}
	cluster, version, err := readMember(ctx, o, m, f.fleet.timeout, namespacesOf(migrations))
	if err != nil {
		return nil, err
	}
	cluster.UseProfiles(profiles)
	rows := make([]FleetRow, 0, len(migrations))
	for _, pm := range migrations {
		r, err := Plan(cluster, pm)
		if err != nil {
			return nil, fmt.Errorf("plan %s/%s: %w", pm.Namespace, pm.Name, err)
		}
		row := fleetRow(r)
		row.Cluster, row.KubernetesVersion = m.Name, version
		rows = append(rows, row)
	}
	return rows, nil
}

// fleetPlanOf gathers the rows, a cluster that could not be asked as one
// row with its error.
func fleetPlanOf(results []fleet.Result[[]FleetRow]) FleetPlan {
	var plan FleetPlan
	for _, res := range results {
		if res.Err != nil {
			plan.Rows = append(plan.Rows, FleetRow{Cluster: res.Member.Name, Level: fleet.Unknown, Outcome: "Error", Error: res.Err.Error()})
			continue
		}
		plan.Rows = append(plan.Rows, res.Value...)
	}
	for _, r := range plan.Rows {
		plan.Worst = fleet.Worst(plan.Worst, r.Level)
	}
	return plan
}

// fleetRow sums up one cluster's plan of one migration.
func fleetRow(r Report) FleetRow {
	row := FleetRow{Migration: r.Migration, Namespace: r.Namespace}
	switch {
	case len(r.Missing) > 0:
		row.Outcome, row.Reason = string(planning.Blocked), "TargetNotFound: "+strings.Join(r.Missing, ", ")
	case r.Verdict != nil:
		row.Outcome, row.Reason = r.Verdict.Outcome, r.Verdict.Reason
		row.Request, row.Hazards = r.Verdict.Request, r.Verdict.Hazards
	case r.Reached != "":
		row.Outcome = "Reached"
	}
	if n := len(r.Stages); n > 0 {
		row.Capacity = r.Stages[n-1].Capacity.Summary
	}
	row.Hazard = firstHazard(r)
	for _, s := range r.Stages {
		pods := 0
		for _, t := range s.Targets {
			pods += int(t.RecreatesCount)
		}
		row.Recreates = append(row.Recreates, StageRecreates{Stage: s.Stage, Pods: pods})
	}
	row.Level = r.Level()
	return row
}

// firstHazard is the first blocking finding of the plan, the verdict's
// before the stages', else the first finding of any severity.
func firstHazard(r Report) *pgv1.Hazard {
	var all []pgv1.Hazard
	if r.Verdict != nil {
		all = append(all, r.Verdict.Hazards...)
	}
	for _, s := range r.Stages {
		all = append(all, s.Hazards...)
	}
	for i := range all {
		if all[i].Severity == pgv1.SeverityBlocking {
			return &all[i]
		}
	}
	if len(all) > 0 {
		return &all[0]
	}
	return nil
}

// printFleetPlan writes the matrix.
func printFleetPlan(w io.Writer, format string, plan FleetPlan) error {
	switch format {
	case outputJSON, outputYAML:
		return encode(w, format, plan)
	case outputGitHub:
		for _, r := range plan.Rows {
			fmt.Fprintf(w, "::%s title=%s::%s\n", githubLevel(r.Level), escapeProperty(r.Cluster+": "+rowName(r)+" "+r.Outcome), escapeData(rowDetail(r)))
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tVERSION\tMIGRATION\tLEVEL\tOUTCOME\tCAPACITY\tRECREATES\tREQUEST\tFIRST HAZARD OR ERROR")
	for _, r := range plan.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Cluster, orNone(r.KubernetesVersion), orNone(rowName(r)), r.Level,
			r.Outcome, orNone(r.Capacity), recreatesCell(r.Recreates), requestCell(r.Request), orNone(rowDetail(r)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nWorst: %s\n", plan.Worst)
	return err
}

func rowName(r FleetRow) string {
	if r.Migration == "" {
		return ""
	}
	return r.Namespace + "/" + r.Migration
}

// rowDetail is what a person reads first about a row: the error, the first
// hazard and its fix, or the reason of the outcome.
func rowDetail(r FleetRow) string {
	switch {
	case r.Error != "":
		return r.Error
	case r.Hazard != nil:
		return r.Hazard.Type + ": " + r.Hazard.Message
	}
	return r.Reason
}

func recreatesCell(rs []StageRecreates) string {
	var parts []string
	for _, s := range rs {
		parts = append(parts, fmt.Sprintf("%s %d", s.Stage, s.Pods))
	}
	return orNone(strings.Join(parts, ", "))
}

func requestCell(r *RequestReport) string {
	if r == nil {
		return orNone("")
	}
	return fmt.Sprintf("%d node(s)", r.Nodes)
}

// githubLevel is the workflow command a row's level is written with.
func githubLevel(l fleet.Level) string {
	switch l {
	case fleet.OK:
		return "notice"
	case fleet.Warn:
		return "warning"
	}
	return "error"
}
