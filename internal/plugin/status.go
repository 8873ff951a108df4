package plugin

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/fleet"
	"github.com/placement-guard/placement-guard/internal/placement"
)

func newStatusCommand(o *Options) *cobra.Command {
	var (
		p             statusPrint
		allNamespaces bool
		selector      string
		fleetFl       fleetFlags
	)
	cmd := &cobra.Command{
		Use:   "status [NAME]",
		Short: "Show a PlacementMigration as a tree, or list them: phase, stage, why",
		Long: `status NAME shows one migration as a tree: phase, conditions, the write in
flight, each target's stages, hazards and plan. Without a name it lists the
namespace's migrations, or every namespace's with -A.

Across a fleet (--contexts, --all-contexts or --kubeconfig-dir) it lists the
migration of that name, or every migration -l matches, on every cluster:
phase, stage, whether the status is about the current spec, age and the
reason it waits. A cluster without the CRD says "not installed"; one that
cannot be read is a row with its error, and status exits 1.

--fail-on makes status a check: it exits 1 when a migration is Stalled
(Blocked), or when one is anything but Ready for its current spec (Warn).
To wait until every migration is Ready, use kubectl placement wait.`,
		Example: `  kubectl placement status -n db graphdb-apart
  kubectl placement status web-apart -o yaml
  kubectl placement status -A -l team=search -o wide

  # One migration across every cluster of the kubeconfig
  kubectl placement status -n db graphdb-apart --all-contexts

  # Every production cluster but the canary; exit 1 if any is Stalled
  kubectl placement status -n db graphdb-apart --contexts 'prod-*' --exclude-contexts prod-canary --fail-on Blocked`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeMigrations(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			sel, err := labels.Parse(selector)
			if err != nil {
				return usagef("-l: %v", err)
			}
			threshold, err := p.threshold()
			if err != nil {
				return err
			}
			if fleetFl.listClusters {
				return listFleet(o, &fleetFl)
			}
			if fleetFl.fleetMode() {
				if p.output == outputTree {
					p.output = outputTable
				}
				q := statusQuery{selector: sel, allNamespaces: allNamespaces}
				if len(args) == 1 {
					q.name = args[0]
				}
				return runFleetStatus(cmd.Context(), o, &fleetFl, q, p)
			}
			var items []pgv1.PlacementMigration
			if len(args) == 0 {
				if err := checkOutput(p.output, outputTree, outputTable, outputWide, outputYAML, outputJSON); err != nil {
					return err
				}
				if items, err = listMigrations(cmd.Context(), o, allNamespaces, sel, p); err != nil {
					return err
				}
			} else {
				if allNamespaces || selector != "" {
					return usagef("-A and -l list migrations; give no NAME with them")
				}
				if err := checkOutput(p.output, outputTree, outputYAML, outputJSON); err != nil {
					return err
				}
				pm, err := getMigration(cmd.Context(), o, args[0])
				if err != nil {
					return err
				}
				if p.output != outputTree {
					pm.ManagedFields = nil
					setMigrationKind(pm)
					if err := encode(o.Out, p.output, pm); err != nil {
						return err
					}
					return failsAt(threshold, *pm)
				}
				printStatusTree(o.Out, pm, time.Now())
				items = []pgv1.PlacementMigration{*pm}
			}
			return failsAt(threshold, items...)
		},
	}
	cmd.Flags().StringVarP(&p.output, "output", "o", outputTree, "output format: tree (a table when listing), wide (a table with the message), yaml or json")
	cmd.Flags().BoolVar(&p.noHeaders, "no-headers", false, "print tables without their header line")
	cmd.Flags().StringVar(&p.failOn, "fail-on", "", "exit 1 when a migration is Stalled (Blocked) or anything but Ready for its current spec (Warn); by default only a cluster that cannot be read fails")
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "list the migrations of every namespace")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "list only the migrations this label selector matches")
	fleetFl.add(cmd, o, false)
	return cmd
}

// failsAt is errHazardsFound when a migration's level reaches threshold
// (nil: never), else err.
func failsAt(threshold *fleet.Level, items ...pgv1.PlacementMigration) error {
	if threshold == nil {
		return nil
	}
	for i := range items {
		if fleet.Fails(migrationLevel(&items[i]), *threshold) {
			return errHazardsFound
		}
	}
	return nil
}

// listMigrations prints the migrations of the namespace, or of all, and
// returns them: as kubectl get does, a table, or a List in JSON or YAML.
func listMigrations(ctx context.Context, o *Options, all bool, sel labels.Selector, p statusPrint) ([]pgv1.PlacementMigration, error) {
	c, err := o.client()
	if err != nil {
		return nil, err
	}
	var opts []client.ListOption
	if !all {
		ns, err := o.Namespace()
		if err != nil {
			return nil, err
		}
		opts = append(opts, client.InNamespace(ns))
	}
	if !sel.Empty() {
		opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
	}
	var list pgv1.PlacementMigrationList
	if err := c.List(ctx, &list, opts...); err != nil {
		return nil, usageError{fmt.Errorf("list PlacementMigrations: %w", err)}
	}
	if p.output == outputYAML || p.output == outputJSON {
		return list.Items, encode(o.Out, p.output, kubectlList(list.Items))
	}
	printMigrationTable(o.Out, list.Items, all, p.output == outputWide, p.noHeaders, time.Now())
	return list.Items, nil
}

// kubectlList is items as kubectl get -o json prints a list: a v1 List
// whose items carry their kind.
func kubectlList(items []pgv1.PlacementMigration) map[string]any {
	out := make([]any, len(items))
	for i := range items {
		pm := items[i].DeepCopy()
		pm.ManagedFields = nil
		setMigrationKind(pm)
		out[i] = pm
	}
	return map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{"resourceVersion": ""}, "items": out}
}

// setMigrationKind fills in the kind a typed read leaves empty.
func setMigrationKind(pm *pgv1.PlacementMigration) {
	pm.SetGroupVersionKind(pgv1.GroupVersion.WithKind("PlacementMigration"))
}

// printMigrationTable writes a line per migration, as kubectl get would,
// with the Ready condition's reason (and, wide, its message): why it is
// where it is.
func printMigrationTable(w io.Writer, items []pgv1.PlacementMigration, withNamespace, wide, noHeaders bool, now time.Time) {
	if len(items) == 0 {
		fmt.Fprintln(w, "No PlacementMigrations found.")
		return
	}
	t := newTable(w, noHeaders)
	columns := []string{"NAME", "PHASE", "STAGE", "FINAL", "TARGETS", "REASON", "AGE"}
	if withNamespace {
		columns = append([]string{"NAMESPACE"}, columns...)
	}
	if wide {
		columns = append(columns, "CURRENT", "MESSAGE")
	}
	t.header(columns...)
	for _, pm := range items {
		reason, message := "", ""
		if ready := meta.FindStatusCondition(pm.Status.Conditions, pgv1.ConditionReady); ready != nil {
			reason, message = ready.Reason, ready.Message
		}
		cells := []string{pm.Name, string(pm.Status.Phase), string(pm.Status.Stage), string(pm.Spec.Final()),
			strconv.Itoa(len(pm.Status.Targets)), reason, ago(pm.CreationTimestamp.Time, now)}
		if withNamespace {
			cells = append([]string{pm.Namespace}, cells...)
		}
		if wide {
			cells = append(cells, yesNo(pm.Status.ObservedGeneration == pm.Generation), message)
		}
		t.row(cells...)
	}
	_ = t.flush()
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

// node is a line of the status tree and the lines under it.
type node struct {
	text     string
	children []*node
}

func (n *node) add(format string, args ...any) *node {
	c := &node{text: fmt.Sprintf(format, args...)}
	n.children = append(n.children, c)
	return c
}

// write draws the tree with box-drawing branches.
func (n *node) write(w io.Writer, prefix string) {
	for i, c := range n.children {
		branch, indent := "├─ ", "│  "
		if i == len(n.children)-1 {
			branch, indent = "└─ ", "   "
		}
		fmt.Fprintf(w, "%s%s%s\n", prefix, branch, c.text)
		c.write(w, prefix+indent)
	}
}

// printStatusTree writes what a person needs to know of a migration.
func printStatusTree(w io.Writer, pm *pgv1.PlacementMigration, now time.Time) {
	root := &node{}
	st := pm.Status
	phase := string(st.Phase)
	if phase == "" {
		phase = "(not reconciled yet)"
	}
	if pm.Spec.Paused {
		phase += " (spec.paused)"
	}
	p := root.add("Phase: %s, stage %s, final stage %s, generation %d observed %d", phase, orNone(string(st.Stage)), pm.Spec.Final(), pm.Generation, st.ObservedGeneration)
	if ready := meta.FindStatusCondition(st.Conditions, pgv1.ConditionReady); ready != nil {
		p.add("%s", ready.Message)
	}
	if c := st.Capacity; c != nil {
		root.add("Capacity: %s", placement.Capacity{QualifyingNodes: int(c.QualifyingNodes), RequiredNodes: int(c.RequiredNodes),
			QualifyingDomains: int(c.QualifyingDomains), RequiredDomains: int(c.RequiredDomains)}.Found())
	}
	conds := root.add("Conditions")
	for _, c := range st.Conditions {
		conds.add("%s=%s %s (%s ago): %s", c.Type, c.Status, c.Reason, ago(c.LastTransitionTime.Time, now), c.Message)
	}
	if op := st.Operation; op != nil {
		root.add("Operation in flight: %s %s -> %s since %s ago", op.Action, orNone(string(op.From)), op.Stage, ago(op.StartedAt.Time, now))
	}
	targets := root.add("Targets")
	for _, ts := range st.Targets {
		addTargetStatus(targets, ts, now)
	}
	if len(st.Hazards) > 0 {
		hazards := root.add("Hazards")
		for _, h := range st.Hazards {
			hazards.add("%s %s %s: %s", h.Severity, h.Type, orNone(h.Target), h.Message)
		}
	}
	addRebalance(root, pm, now)
	plan := root.add("Plan")
	for _, e := range st.Plan {
		more := ""
		if int(e.RecreatesCount) > len(e.Recreates) {
			more = fmt.Sprintf(" and %d more", int(e.RecreatesCount)-len(e.Recreates))
		}
		plan.add("%s/%s to %s: %s; recreates %d pod(s) %s%s", e.Kind, e.Name, e.Stage, e.Change, e.RecreatesCount, strings.Join(e.Recreates, ", "), more)
	}
	fmt.Fprintf(w, "PlacementMigration %s/%s\n", pm.Namespace, pm.Name)
	root.write(w, "")
}

// addRebalance shows what spec.rebalance keeps: the mode, the move in
// flight and the moves made, newest first.
func addRebalance(parent *node, pm *pgv1.PlacementMigration, now time.Time) {
	mode := pm.Spec.RebalanceMode()
	rb := pm.Status.Rebalance
	if mode == pgv1.RebalanceOff && rb == nil {
		return
	}
	budget := ""
	if mode == pgv1.RebalanceEvict {
		budget = fmt.Sprintf(", at most %d move(s) an hour", pm.Spec.MaxMovesPerHour())
	}
	r := parent.add("Rebalance: %s%s", mode, budget)
	if rb == nil {
		return
	}
	if rb.Stopped != "" {
		r.add("%s", rb.Stopped)
	}
	if mv := rb.Move; mv != nil {
		state := "recorded, to be evicted"
		if mv.Evicted {
			state = "evicted, waiting for its replacement"
		}
		r.add("Moving %s of %s from %s to %s (node %s): %s, since %s ago", mv.Pod, mv.Target, mv.From, mv.To, orNone(mv.Node), state, ago(mv.At.Time, now))
	}
	for i := len(rb.Moves) - 1; i >= 0; i-- {
		mv := rb.Moves[i]
		what := fmt.Sprintf("%s %s of %s from %s to %s, %s ago", mv.Result, mv.Pod, mv.Target, mv.From, mv.To, ago(mv.At.Time, now))
		switch {
		case mv.Replacement != "":
			what += fmt.Sprintf(": replaced by %s in %s", mv.Replacement, mv.LandedIn)
		case mv.Message != "":
			what += ": " + mv.Message
		}
		r.add("%s", what)
	}
}

func addTargetStatus(parent *node, ts pgv1.TargetStatus, now time.Time) {
	verified := "nothing verified"
	if ts.Verified != nil {
		verified = fmt.Sprintf("%s verified %s ago", ts.Verified.Stage, ago(ts.Verified.At.Time, now))
	}
	pods := ""
	if ts.Pods != nil {
		pods = fmt.Sprintf(", %d pod(s), %d restart(s)", ts.Pods.Count, ts.Pods.Restarts)
	}
	t := parent.add("%s/%s: stage %s, %s%s", ts.Kind, ts.Name, orNone(string(ts.Stage)), verified, pods)
	for _, s := range ts.Stages {
		outcome := string(s.Outcome)
		if outcome == "" {
			outcome = "in progress"
		}
		t.add("%s: %s", s.Stage, outcome)
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
