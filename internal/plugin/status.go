package plugin

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

func newStatusCommand(o *Options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "Show a PlacementMigration as a tree: phase, conditions, targets, hazards and plan",
		Example: `  kubectl placement status -n db graphdb-apart
  kubectl placement status web-apart -o yaml`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeMigrations(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, "tree", "yaml", "json"); err != nil {
				return err
			}
			pm, err := getMigration(cmd.Context(), o, args[0])
			if err != nil {
				return err
			}
			if output != "tree" {
				pm.ManagedFields = nil
				return encode(o.Out, output, pm)
			}
			printStatusTree(o.Out, pm, time.Now())
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "tree", "output format: tree, yaml or json")
	return cmd
}

// getMigration reads one migration of the namespace.
func getMigration(ctx context.Context, o *Options, name string) (*pgv1.PlacementMigration, error) {
	ns, err := o.Namespace()
	if err != nil {
		return nil, err
	}
	c, err := o.client()
	if err != nil {
		return nil, err
	}
	pm := &pgv1.PlacementMigration{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, usagef("PlacementMigration %q not found in namespace %s", name, ns)
		}
		return nil, usageError{fmt.Errorf("get PlacementMigration %s/%s: %w", ns, name, err)}
	}
	return pm, nil
}

// completeMigrations completes the names of the namespace's migrations.
func completeMigrations(o *Options) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ns, err := o.Namespace()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		c, err := o.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var list pgv1.PlacementMigrationList
		if err := c.List(cmd.Context(), &list, client.InNamespace(ns)); err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		names := make([]string, len(list.Items))
		for i, pm := range list.Items {
			names[i] = pm.Name
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// tree writes an indented tree with box-drawing branches.
type tree struct {
	w io.Writer
}

func (t tree) line(depth int, last bool, format string, args ...any) {
	prefix := strings.Repeat("│  ", max(depth-1, 0))
	if depth > 0 {
		if last {
			prefix += "└─ "
		} else {
			prefix += "├─ "
		}
	}
	fmt.Fprintf(t.w, prefix+format+"\n", args...)
}

// printStatusTree writes what a person needs to know of a migration.
func printStatusTree(w io.Writer, pm *pgv1.PlacementMigration, now time.Time) {
	t := tree{w}
	st := pm.Status
	t.line(0, false, "PlacementMigration %s/%s", pm.Namespace, pm.Name)
	phase := string(st.Phase)
	if phase == "" {
		phase = "(not reconciled yet)"
	}
	if pm.Spec.Paused {
		phase += " (spec.paused)"
	}
	t.line(1, false, "Phase: %s, stage %s, final stage %s, generation %d observed %d", phase, orNone(string(st.Stage)), pm.Spec.Final(), pm.Generation, st.ObservedGeneration)
	if ready := meta.FindStatusCondition(st.Conditions, pgv1.ConditionReady); ready != nil {
		t.line(2, true, "%s", ready.Message)
	}
	if st.Capacity != nil {
		t.line(1, false, "Capacity: %s (%d/%d qualifying nodes, %d/%d domains)", st.Capacity.Summary,
			st.Capacity.QualifyingNodes, st.Capacity.RequiredNodes, st.Capacity.QualifyingDomains, st.Capacity.RequiredDomains)
	}
	t.line(1, false, "Conditions")
	for i, c := range st.Conditions {
		t.line(2, i == len(st.Conditions)-1, "%s=%s %s (%s ago): %s", c.Type, c.Status, c.Reason, ago(c.LastTransitionTime.Time, now), c.Message)
	}
	if op := st.Operation; op != nil {
		t.line(1, false, "Operation in flight: %s %s -> %s since %s ago", op.Action, orNone(string(op.From)), op.Stage, ago(op.StartedAt.Time, now))
	}
	t.line(1, false, "Targets")
	for i, ts := range st.Targets {
		printTargetStatus(t, ts, i == len(st.Targets)-1, now)
	}
	if len(st.Hazards) > 0 {
		t.line(1, false, "Hazards")
		for i, h := range st.Hazards {
			t.line(2, i == len(st.Hazards)-1, "%s %s %s: %s", h.Severity, h.Type, orNone(h.Target), h.Message)
		}
	}
	t.line(1, true, "Plan")
	for i, p := range st.Plan {
		more := ""
		if int(p.RecreatesCount) > len(p.Recreates) {
			more = fmt.Sprintf(" and %d more", int(p.RecreatesCount)-len(p.Recreates))
		}
		t.line(2, i == len(st.Plan)-1, "%s/%s to %s: %s; recreates %d pod(s) %s%s", p.Kind, p.Name, p.Stage, p.Change, p.RecreatesCount, strings.Join(p.Recreates, ", "), more)
	}
}

func printTargetStatus(t tree, ts pgv1.TargetStatus, last bool, now time.Time) {
	verified := "nothing verified"
	if ts.Verified != nil {
		verified = fmt.Sprintf("%s verified %s ago", ts.Verified.Stage, ago(ts.Verified.At.Time, now))
	}
	pods := ""
	if ts.Pods != nil {
		pods = fmt.Sprintf(", %d pod(s), %d restart(s)", ts.Pods.Count, ts.Pods.Restarts)
	}
	t.line(2, last, "%s/%s: stage %s, %s%s", ts.Kind, ts.Name, orNone(string(ts.Stage)), verified, pods)
	for i, s := range ts.Stages {
		outcome := string(s.Outcome)
		if outcome == "" {
			outcome = "in progress"
		}
		t.line(3, i == len(ts.Stages)-1, "%s: %s", s.Stage, outcome)
	}
}

func orNone(s string) string {
	if s == "" {
		return "None"
	}
	return s
}

func ago(at, now time.Time) string {
	if at.IsZero() {
		return "?"
	}
	return duration.HumanDuration(now.Sub(at))
}
