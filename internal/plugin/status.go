package plugin

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/fleet"
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
