package plugin

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func newLintCommand(o *Options) *cobra.Command {
	var (
		output   string
		nodes    int
		zones    []string
		snapshot string
		live     bool
		fleetFl  fleetFlags
	)
	cmd := &cobra.Command{
		Use:   "lint [FILE...|-]",
		Short: "Find placement hazards in rendered manifests, before they merge",
		Long: `lint reads rendered manifests (files, or - for standard input) and judges
every required pod anti-affinity term and DoNotSchedule topology spread of their
Deployments and StatefulSets, and every PlacementMigration among them, with
the operator's engine:

  - a rolling update that deadlocks (maxUnavailable 0 and no node left for the
    surge pod), given --nodes N identical nodes or a --snapshot of the cluster;
  - a selector that also selects other workloads' pods of the same manifests
    (blue and green counted together);
  - a constraint that would replace one the workload already has;
  - a hard constraint the cluster lacks the capacity for (--snapshot, --live).

--live judges against the current context's cluster (get and list only).
Across a fleet (--contexts a,b,c, --all-contexts, --kubeconfig-dir or
--snapshot-dir) it judges the same manifests against every cluster, one
row each, and exits 1 when the worst row reaches --fail-on.

Without --nodes, --snapshot or --live only the findings that need no nodes are
reported. The nodes --nodes assumes carry a hostname each and, with --zones,
a zone each (round robin); a constraint over any other topology key is judged
as without nodes, never against a topology lint made up. lint says on
standard error what it assumed. Exits 1 when a blocking hazard is found.`,
		Example: `  # In CI, on a chart's output, assuming three nodes
  helm template web ./chart | kubectl placement lint --nodes 3 -o github -

  # A chart with a zone spread: six nodes over three zones
  helm template web ./chart | kubectl placement lint --nodes 6 --zones a,b,c -

  # Against a saved snapshot of the cluster the manifests go to
  kubectl placement lint --snapshot snap/ deploy/*.yaml

  # Against every cluster the chart goes to
  helm template web ./chart | kubectl placement lint --contexts eu-1,us-1 -`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, outputTable, outputJSON, outputYAML, outputGitHub); err != nil {
				return err
			}
			if fleetFl.listClusters {
				return listFleet(o, &fleetFl)
			}
			if len(args) == 0 {
				return usagef("name the manifests to lint, or - for standard input")
			}
			if nodes < 0 {
				return usagef("--nodes must not be negative")
			}
			sources := 0
			for _, set := range []bool{nodes > 0, snapshot != "", live, fleetFl.fleetMode()} {
				if set {
					sources++
				}
			}
			if sources > 1 {
				return usagef("judge against one of --nodes, --snapshot, --live or a fleet")
			}
			if len(zones) > 0 && nodes == 0 {
				return usagef("--zones spreads the nodes of --nodes; give --nodes too")
			}
			if len(zones) > nodes {
				return usagef("--zones names %d zones for %d nodes: every zone needs a node", len(zones), nodes)
			}
			ns, err := o.Namespace()
			if err != nil {
				ns = "default"
			}
			var docs []Document
			for _, name := range args {
				in, err := readInput(o, name)
				if err != nil {
					return err
				}
				d, err := ReadManifests(name, in)
				in.Close()
				if err != nil {
					return usageError{err}
				}
				docs = append(docs, d...)
			}
			if fleetFl.fleetMode() {
				return runFleetLint(cmd.Context(), o, &fleetFl, docs, ns, output)
			}
			opts := LintOptions{Namespace: ns, Nodes: nodes, Zones: zones}
			if live {
				c, err := o.client()
				if err != nil {
					return err
				}
				if opts.Cluster, err = ReadCluster(cmd.Context(), c, manifestNamespaces(docs, ns)...); err != nil {
					return usageError{err}
				}
			}
			if snapshot != "" {
				sdocs, err := ReadDir(snapshot)
				if err != nil {
					return usageError{err}
				}
				opts.Cluster = ClusterOf(sdocs)
			}
			if note := opts.Assumptions(); note != "" {
				fmt.Fprintln(o.ErrOut, "note: "+note)
			}
			findings, err := Lint(docs, opts)
			if err != nil {
				return err
			}
			if err := printFindings(o.Out, output, findings); err != nil {
				return err
			}
			for _, f := range findings {
				if f.Blocking {
					return errHazardsFound
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", outputTable, "output format: table, json, yaml or github (workflow annotations)")
	cmd.Flags().IntVar(&nodes, "nodes", 0, "assume this many identical nodes, one hostname each")
	cmd.Flags().StringSliceVar(&zones, "zones", nil, "spread the assumed nodes over these zones (topology.kubernetes.io/zone), round robin")
	cmd.Flags().StringVar(&snapshot, "snapshot", "", "judge against this directory of cluster YAML")
	cmd.Flags().BoolVar(&live, "live", false, "judge against the current context's cluster")
	fleetFl.add(cmd, o, true)
	cmd.Flags().StringVar(&fleetFl.failOn, "fail-on", "Blocked", "across a fleet, the level from which lint exits 1: Blocked, or Warn")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{outputTable, outputJSON, outputYAML, outputGitHub}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.MarkFlagDirname("snapshot")
	return cmd
}

func printFindings(w io.Writer, format string, fs []Finding) error {
	switch format {
	case outputJSON, outputYAML:
		if fs == nil {
			fs = []Finding{}
		}
		return encode(w, format, fs)
	case outputGitHub:
		for _, f := range fs {
			level := "warning"
			if f.Blocking {
				level = "error"
			}
			fmt.Fprintf(w, "::%s file=%s,line=%d,title=%s::%s\n", level, escapeProperty(f.File), f.Line, escapeProperty(f.Type+" in "+f.Object), escapeData(f.Message))
		}
		return nil
	}
	if len(fs) == 0 {
		fmt.Fprintln(w, "No placement hazards found.")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LOCATION\tOBJECT\tSEVERITY\tHAZARD\tMESSAGE")
	for _, f := range fs {
		sev := "Info"
		if f.Blocking {
			sev = "Blocking"
		}
		fmt.Fprintf(tw, "%s:%d\t%s\t%s\t%s\t%s\n", f.File, f.Line, f.Object, sev, f.Type, f.Message)
	}
	return tw.Flush()
}

// escapeData and escapeProperty encode a workflow command's message and
// properties as GitHub Actions reads them.
func escapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

func escapeProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}
