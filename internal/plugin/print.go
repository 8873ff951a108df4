package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	"github.com/placement-guard/placement-guard/internal/placement"
)

// encode writes v as indented JSON or as YAML.
func encode(w io.Writer, format string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if format == outputYAML {
		if data, err = yaml.JSONToYAML(data); err != nil {
			return err
		}
	} else {
		data = append(data, '\n')
	}
	_, err = w.Write(data)
	return err
}

// printPlanTable writes a plan for a person: a summary line per stage,
// then each stage's hazards and per target the rollout.
func printPlanTable(w io.Writer, r Report) {
	name := r.Migration
	if name == "" {
		name = "plan"
	}
	fmt.Fprintf(w, "PlacementMigration %s/%s: %s\n", r.Namespace, name, r.Constraint)
	printProfiles(w, r)
	for _, m := range r.Missing {
		fmt.Fprintf(w, "Target not found: %s\n", m)
	}
	if len(r.Stages) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STAGE\tCAPACITY\tFEASIBLE\tHAZARDS\tRECREATES")
	for _, s := range r.Stages {
		recreates := 0
		for _, t := range s.Targets {
			recreates += int(t.RecreatesCount)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", s.Stage, capacityCell(s.Capacity), yesNo(s.Feasible), len(s.Hazards), recreates)
	}
	tw.Flush()
	printVerdict(w, r.Verdict)
	if r.Reached != "" {
		fmt.Fprintf(w, "\nEvery target is verified at the %s stage, the final one: the operator has nothing left to apply.\n", r.Reached)
	}
	for _, s := range r.Stages {
		fmt.Fprintf(w, "\n%s stage\n", s.Stage)
		fmt.Fprintf(w, "  Capacity: %s\n", capacityLine(s.Capacity))
		for _, h := range s.Hazards {
			target := h.Target
			if target == "" {
				target = "cluster"
			}
			fmt.Fprintf(w, "  %s %s (%s): %s\n", h.Severity, h.Type, target, h.Message)
		}
		for _, t := range s.Targets {
			printTargetPlan(w, t)
		}
	}
	if c := r.Costs; c != nil {
		fmt.Fprintf(w, "\nDeletion costs, once the migration has succeeded (on the pods as they stand now)\n  %s\n", c.Summary)
		for _, wr := range c.Writes {
			if wr.Cost == nil {
				fmt.Fprintf(w, "  remove the cost of %s\n", wr.Pod)
				continue
			}
			fmt.Fprintf(w, "  %s: pod-deletion-cost %d\n", wr.Pod, *wr.Cost)
		}
	}
	if len(r.Moves) > 0 || len(r.MovesNote) > 0 {
		fmt.Fprintf(w, "\nRebalance (mode Evict), once the migration has succeeded\n")
		for _, m := range r.Moves {
			fmt.Fprintf(w, "  move %s of %s from %s to %s (node %s)\n", m.Pod, m.Target, m.From, m.To, m.Node)
		}
		for _, n := range r.MovesNote {
			fmt.Fprintf(w, "  %s\n", n)
		}
	}
}

// printVerdict says what the operator would do now, before the first
// stage.
func printVerdict(w io.Writer, v *VerdictReport) {
	if v == nil {
		return
	}
	switch v.Outcome {
	case "Proceeds":
		fmt.Fprintf(w, "\nThe operator would apply the %s stage now.\n", v.Stage)
	case "WaitingForCapacity":
		fmt.Fprintf(w, "\nThe operator would wait for capacity before the %s stage: %s\n", v.Stage, v.Message)
	case "Waiting":
		fmt.Fprintf(w, "\nThe operator would wait before the %s stage: %s\n", v.Stage, v.Message)
	default:
		fmt.Fprintf(w, "\nThe operator would block before the %s stage (%s): %s\n", v.Stage, v.Reason, v.Message)
	}
	if r := v.Request; r != nil {
		capped := ""
		if r.MaxNodes > 0 {
			capped = fmt.Sprintf(", %d of the %d missing (spec.capacity.provision.maxNodes %d)", r.Nodes, r.Shortfall, r.MaxNodes)
		}
		fmt.Fprintf(w, "It would ask the autoscaler (mode %s) for %d node(s) with %d placeholder pod(s)%s: %s\n", r.Mode, r.Nodes, r.Placeholders, capped, r.Why)
	}
}

func printTargetPlan(w io.Writer, t TargetReport) {
	fmt.Fprintf(w, "  %s/%s: %s\n", t.Kind, t.Name, t.Change)
	if len(t.Recreates) > 0 {
		fmt.Fprintf(w, "    recreates %d pod(s): %s\n", t.RecreatesCount, strings.Join(t.Recreates, ", "))
	}
	if t.Note != "" {
		fmt.Fprintf(w, "    note: %s\n", t.Note)
	}
	if t.Blocked != "" {
		fmt.Fprintf(w, "    rollout stops at %s\n", t.Blocked)
	}
	if t.PredictedPlacement != "" {
		fmt.Fprintf(w, "    %s\n", t.PredictedPlacement)
	}
	for i, s := range t.Steps {
		switch {
		case s.Action == placement.StepDelete:
			fmt.Fprintf(w, "    %3d. delete   %s\n", i+1, s.Pod)
		case s.Node == "":
			fmt.Fprintf(w, "    %3d. %-8s %s (stays Pending)\n", i+1, s.Action, s.Pod)
		default:
			fmt.Fprintf(w, "    %3d. %-8s %s -> %s%s\n", i+1, s.Action, s.Pod, s.Node, landingNote(s))
		}
	}
}

// landingNote says when a step's node is one of several the scheduler
// may choose.
func landingNote(s Step) string {
	switch {
	case len(s.Tied) > 0 && s.Sampled:
		return fmt.Sprintf(" (or, tied, %s; the scheduler scores a sample of the nodes)", strings.Join(s.Tied, ", "))
	case len(s.Tied) > 0:
		return fmt.Sprintf(" (or, tied, %s)", strings.Join(s.Tied, ", "))
	case s.Sampled:
		return " (one of the scheduler's choices: it scores a sample of the nodes)"
	}
	return ""
}

func capacityCell(c CapacityReport) string {
	if c.RequiredNodes == 0 && c.RequiredDomains == 0 {
		return "-"
	}
	return c.Summary
}

func capacityLine(c CapacityReport) string {
	where := ""
	if c.Selector != "" {
		where = " (" + c.Selector + ")"
	}
	line := fmt.Sprintf("%d/%d qualifying nodes%s", c.QualifyingNodes, c.RequiredNodes, where)
	if c.RequiredDomains > 0 {
		line += fmt.Sprintf(", %d/%d domains", c.QualifyingDomains, c.RequiredDomains)
	}
	return line
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// printProfiles says which scheduler profile the targets' pods were
// predicted with: one line when they share one, else one per target.
func printProfiles(w io.Writer, r Report) {
	if r.SchedulerProfile != "" {
		fmt.Fprintf(w, "Scheduler profile: %s\n", r.SchedulerProfile)
		return
	}
	if len(r.Stages) == 0 {
		return
	}
	for _, t := range r.Stages[0].Targets {
		if t.SchedulerProfile != "" {
			fmt.Fprintf(w, "Scheduler profile of %s/%s: %s\n", t.Kind, t.Name, t.SchedulerProfile)
		}
	}
}
