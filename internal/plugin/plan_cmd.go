package plugin

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/fleet"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/schedulerprofile"
)

// planFlags describe a migration on the command line, for a plan without
// a manifest.
type planFlags struct {
	file           string
	snapshot       string
	output         string
	targets        []string
	targetSelector string
	antiKey        string
	spreadKey      string
	selector       string
	maxSkew        int32
	minDomains     int32
	matchLabelKeys []string
	finalStage     string
	nodeSelector   string
	minNodes       int32
	schedConfig    string
	schedName      string
	fleet          fleetFlags
}

// constraintFlags describe a migration on the command line; with -f they
// would be ignored, so they are refused.
var constraintFlags = []string{"target", "target-selector", "anti-affinity-key", "spread-key", "selector", "max-skew",
	"min-domains", "match-label-keys", "final-stage", "node-selector", "min-nodes"}

func newPlanCommand(o *Options) *cobra.Command {
	f := &planFlags{}
	cmd := &cobra.Command{
		Use:   "plan (-f MIGRATION | --target KIND/NAME (--anti-affinity-key KEY | --spread-key KEY))",
		Short: "Simulate a PlacementMigration on the cluster, changing nothing",
		Long: `plan reads nodes, pods, workloads, claims and volumes (get and list only)
and asks the same engine as the operator about every stage of the migration:
capacity found and needed, the hazards and how to fix them, and per target
the pods its rollout recreates, in order, and where each new pod would land.
Nothing is created or changed. With --snapshot it reads a directory of YAML
instead of the cluster, so it runs in CI without cluster access.

Across a fleet (--contexts a,b,c, --all-contexts, --kubeconfig-dir or
--snapshot-dir) it plans the same migration on every cluster, a few at a
time, and prints a matrix: one row per cluster with its capacity, the
operator's outcome, the first hazard and its fix, the pods each stage
recreates and the capacity a request would ask for. A cluster that cannot
be read is a row with its error.

Exits 1 when the plan reaches --fail-on: Blocked (the default) when a
target is missing or a stage is blocked, as the operator would stop at it;
Warn also when the migration would wait, for capacity, its pods or another
migration. Across a fleet, when the worst row reaches it, or a cluster
could not be asked.`,
		Example: `  # Plan a migration manifest against the current cluster
  kubectl placement plan -f graphdb-apart.yaml

  # The same, from flags
  kubectl placement plan -n db --target deploy/graphdb \
    --anti-affinity-key kubernetes.io/hostname --selector app=search \
    --node-selector role=data --min-nodes 2

  # Offline, on a saved snapshot
  kubectl get nodes,pods,deploy,sts,rs,pvc,pv,sc -A -o yaml > snap/cluster.yaml
  kubectl placement plan -f web-apart.yaml --snapshot snap/ -o json

  # Across three clusters, failing CI when any of them would even wait
  kubectl placement plan -f graphdb-apart.yaml --contexts eu-1,us-1,ap-1 --fail-on Warn`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.file != "" {
				for _, name := range constraintFlags {
					if cmd.Flags().Changed(name) {
						return usagef("give either -f or the constraint flags, not both (--%s)", name)
					}
				}
			}
			return runPlan(cmd.Context(), o, f)
		},
	}
	f.fleet.add(cmd, o, true)
	cmd.Flags().StringVar(&f.fleet.failOn, "fail-on", "Blocked", "the level from which plan exits 1: Blocked, or Warn (also when the migration would wait); across a fleet, the worst row's")
	fl := cmd.Flags()
	fl.StringVarP(&f.file, "filename", "f", "", "PlacementMigration manifest to plan (- for standard input)")
	fl.StringVar(&f.snapshot, "snapshot", "", "read the cluster from this directory of YAML or JSON instead of the API")
	fl.StringVarP(&f.output, "output", "o", outputTable, "output format: table, yaml or json; across a fleet github too")
	fl.StringSliceVar(&f.targets, "target", nil, "workload to migrate, deploy/NAME or sts/NAME (repeatable)")
	fl.StringVar(&f.targetSelector, "target-selector", "", "label selector of the workloads to migrate, instead of --target")
	fl.StringVar(&f.antiKey, "anti-affinity-key", "", "add a pod anti-affinity term with this topology key")
	fl.StringVar(&f.spreadKey, "spread-key", "", "add a topology spread constraint with this topology key")
	fl.StringVar(&f.selector, "selector", "", "label selector of the pods the constraint counts (default: the workload's own pods)")
	fl.Int32Var(&f.maxSkew, "max-skew", 1, "maxSkew of the spread")
	fl.Int32Var(&f.minDomains, "min-domains", 0, "minDomains of the spread")
	fl.StringSliceVar(&f.matchLabelKeys, "match-label-keys", nil, "matchLabelKeys of the constraint")
	fl.StringVar(&f.finalStage, "final-stage", "Hard", "Soft or Hard")
	fl.StringVar(&f.nodeSelector, "node-selector", "", "label selector of the nodes that qualify")
	fl.Int32Var(&f.minNodes, "min-nodes", 0, "qualifying nodes the hard stage needs (default: derived)")
	fl.StringVar(&f.schedConfig, "scheduler-config", "", "the cluster's KubeSchedulerConfiguration file, read whole: predict each pod with the profile its schedulerName names instead of kube-scheduler's default profile")
	fl.StringVar(&f.schedName, "scheduler-name", "default-scheduler", "the profile of --scheduler-config for pods that name no scheduler (each other pod is predicted with the profile its schedulerName names)")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{outputTable, outputYAML, outputJSON, outputGitHub}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("fail-on", cobra.FixedCompletions([]string{"Blocked", "Warn"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("final-stage", cobra.FixedCompletions([]string{"Soft", "Hard"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.MarkFlagDirname("snapshot")
	return cmd
}

func runPlan(ctx context.Context, o *Options, f *planFlags) error {
	if f.fleet.listClusters {
		return listFleet(o, &f.fleet)
	}
	profiles := placement.DefaultProfiles()
	if f.schedConfig != "" {
		var err error
		if profiles, err = schedulerprofile.Load(f.schedConfig, f.schedName); err != nil {
			return usagef("--scheduler-config: %v", err)
		}
	}
	if f.fleet.fleetMode() {
		return runFleetPlan(ctx, o, f, profiles)
	}
	if err := checkOutput(f.output, outputTable, outputYAML, outputJSON); err != nil {
		return err
	}
	ns, err := o.Namespace()
	if err != nil {
		return err
	}
	migrations, err := f.migrations(o, ns)
	if err != nil {
		return err
	}
	cluster, err := readCluster(ctx, o, f.snapshot, namespacesOf(migrations))
	if err != nil {
		return err
	}
	cluster.UseProfiles(profiles)
	threshold, err := f.fleet.threshold()
	if err != nil {
		return err
	}
	var reports []Report
	blocked := false
	for _, pm := range migrations {
		r, err := Plan(cluster, pm)
		if err != nil {
			return err
		}
		blocked = blocked || fleet.Fails(r.Level(), threshold)
		reports = append(reports, r)
	}
	for _, skipped := range cluster.Skipped {
		fmt.Fprintf(o.ErrOut, "warning: skipped, the engine cannot index it: %s\n", skipped)
	}
	if err := printReports(o.Out, f.output, reports); err != nil {
		return err
	}
	if blocked {
		return errHazardsFound
	}
	return nil
}

// namespacesOf lists the migrations' namespaces, once each: the workloads
// of a manifest's migration live where its metadata says, whatever the
// kubeconfig's namespace.
func namespacesOf(pms []*pgv1.PlacementMigration) []string {
	var out []string
	seen := map[string]bool{}
	for _, pm := range pms {
		if !seen[pm.Namespace] {
			seen[pm.Namespace] = true
			out = append(out, pm.Namespace)
		}
	}
	return out
}

// readCluster reads the snapshot directory, or the live cluster.
func readCluster(ctx context.Context, o *Options, snapshot string, namespaces []string) (*Cluster, error) {
	if snapshot != "" {
		c, err := ReadClusterDir(snapshot)
		if err != nil {
			return nil, usageError{err}
		}
		return c, nil
	}
	c, err := o.client()
	if err != nil {
		return nil, err
	}
	cl, err := ReadCluster(ctx, c, namespaces...)
	if err != nil {
		return nil, usageError{err}
	}
	return cl, nil
}

// migrations are those of the manifest, or the one the flags describe.
func (f *planFlags) migrations(o *Options, namespace string) ([]*pgv1.PlacementMigration, error) {
	if f.file != "" {
		in, err := readInput(o, f.file)
		if err != nil {
			return nil, err
		}
		defer in.Close()
		docs, err := ReadManifests(f.file, in)
		if err != nil {
			return nil, usageError{err}
		}
		var out []*pgv1.PlacementMigration
		for _, d := range docs {
			if pm, ok := d.Object.(*pgv1.PlacementMigration); ok {
				if pm.Namespace == "" || o.Config.Namespace != nil && *o.Config.Namespace != "" {
					pm.Namespace = namespace
				}
				out = append(out, pm)
			}
		}
		if len(out) == 0 {
			return nil, usagef("%s holds no PlacementMigration", f.file)
		}
		return out, nil
	}
	pm, err := f.migration(namespace)
	if err != nil {
		return nil, err
	}
	return []*pgv1.PlacementMigration{pm}, nil
}

// printReports writes the plans in the chosen format.
func printReports(w interface{ Write([]byte) (int, error) }, format string, reports []Report) error {
	switch format {
	case outputJSON, outputYAML:
		var v any = reports
		if len(reports) == 1 {
			v = reports[0]
		}
		return encode(w, format, v)
	}
	for i, r := range reports {
		if i > 0 {
			fmt.Fprintln(w)
		}
		printPlanTable(w, r)
	}
	return nil
}
