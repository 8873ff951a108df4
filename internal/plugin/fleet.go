package plugin

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/fleet"
)

// fleetFlags choose the clusters a command asks instead of the current
// context: several contexts (by name or glob pattern), every context, a
// directory of kubeconfigs or (for plan and lint) a directory of
// snapshots.
type fleetFlags struct {
	contexts      []string
	exclude       []string
	allContexts   bool
	kubeconfigDir string
	snapshotDir   string
	listClusters  bool
	parallel      int
	timeout       time.Duration
	failOn        string
}

func (f *fleetFlags) add(cmd *cobra.Command, o *Options, snapshots bool) {
	fl := cmd.Flags()
	defer func() { _ = cmd.RegisterFlagCompletionFunc("contexts", completeContexts(o)) }()
	fl.StringArrayVar(&f.contexts, "contexts", nil, "ask these contexts of the kubeconfig, one row per cluster: names or glob patterns (prod-*), comma-separated or repeated")
	fl.StringArrayVar(&f.exclude, "exclude-contexts", nil, "leave out the clusters whose name (context, or kubeconfig file) matches one of these glob patterns")
	fl.BoolVar(&f.allContexts, "all-contexts", false, "ask every context of the kubeconfig, one row per cluster")
	fl.StringVar(&f.kubeconfigDir, "kubeconfig-dir", "", "ask the cluster of every kubeconfig file in this directory (its current context), one row per file")
	if snapshots {
		fl.StringVar(&f.snapshotDir, "snapshot-dir", "", "plan against every snapshot in this directory, one subdirectory per cluster, offline")
	}
	fl.BoolVar(&f.listClusters, "list-clusters", false, "list the clusters the command would ask, and ask none")
	fl.IntVar(&f.parallel, "parallel", 0, "clusters asked at once, with a fleet (default 4 clusters, or 1 snapshot: each snapshot's read already uses every core, and one at a time bounds the memory to one snapshot's)")
	fl.DurationVar(&f.timeout, "cluster-timeout", 30*time.Second, "how long one cluster of a fleet may take before its row says it did not answer")
}

// fleetMode reports whether the command asks a fleet rather than one
// cluster.
func (f *fleetFlags) fleetMode() bool {
	return len(f.contexts) > 0 || f.allContexts || f.kubeconfigDir != "" || f.snapshotDir != ""
}

// members are the clusters the flags name, less the excluded; giving two
// ways at once is a usage error, and so is a flag that names one cluster
// or one user (--context, --user, --server, ...), which the members'
// own kubeconfig contexts decide.
func (f *fleetFlags) members(o *Options) ([]fleet.Member, error) {
	ways := 0
	for _, set := range []bool{f.allContexts, f.kubeconfigDir != "", f.snapshotDir != "", len(f.contexts) > 0} {
		if set {
			ways++
		}
	}
	if ways > 1 {
		return nil, usagef("name the fleet one way: --contexts, --all-contexts, --kubeconfig-dir or --snapshot-dir")
	}
	if err := refuseSingleClusterFlags(o); err != nil {
		return nil, err
	}
	if _, err := o.connect(); err != nil {
		return nil, err
	}
	var ms []fleet.Member
	var err error
	switch {
	case f.snapshotDir != "":
		ms, err = fleet.SnapshotDir(f.snapshotDir)
	case f.kubeconfigDir != "":
		ms, err = fleet.KubeconfigDir(f.kubeconfigDir)
	default:
		raw, rerr := o.Config.ToRawKubeConfigLoader().RawConfig()
		if rerr != nil {
			return nil, usageError{fmt.Errorf("read the kubeconfig: %w", rerr)}
		}
		ms, err = fleet.Contexts(&raw, f.contexts, f.allContexts)
	}
	if err != nil {
		return nil, usageError{err}
	}
	if ms, err = fleet.Exclude(ms, f.exclude); err != nil {
		return nil, usageError{err}
	}
	if len(ms) == 0 {
		return nil, usagef("no cluster left to ask: --exclude-contexts left out every one")
	}
	return ms, nil
}

// options are the bounds of a fleet run.
func (f *fleetFlags) options() fleet.Options {
	parallel := f.parallel
	switch {
	case parallel > 0:
	case f.snapshotDir != "":
		parallel = 1
	default:
		parallel = 4
	}
	return fleet.Options{Parallel: parallel, Timeout: f.timeout}
}

// threshold is --fail-on.
func (f *fleetFlags) threshold() (fleet.Level, error) {
	l, err := fleet.ParseThreshold(f.failOn)
	if err != nil {
		return 0, usageError{err}
	}
	return l, nil
}

// memberClient connects to a live member, each request bounded by the
// fleet's timeout (or --request-timeout), and reads the version its API
// server runs.
func memberClient(ctx context.Context, o *Options, m fleet.Member, timeout time.Duration) (client.Client, string, error) {
	connect, err := o.connect()
	if err != nil {
		return nil, "", err
	}
	if connect.RequestTimeout == 0 {
		connect.RequestTimeout = timeout
	}
	cfg, err := m.RESTConfig(ctx, connect)
	if err != nil {
		return nil, "", err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("connect to the cluster: %w", err)
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return nil, "", fmt.Errorf("reach the API server: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme})
	if err != nil {
		return nil, v.GitVersion, fmt.Errorf("connect to the cluster: %w", err)
	}
	return c, v.GitVersion, nil
}

// fleetNamespace is the namespace a fleet member's rows are about: -n when
// given, else the member's context's, else default.
func fleetNamespace(o *Options, m fleet.Member) string {
	if o.Config.Namespace != nil && *o.Config.Namespace != "" {
		return *o.Config.Namespace
	}
	if ns := m.Namespace(); ns != "" {
		return ns
	}
	return "default"
}

// askFleet asks every member of the fleet the flags name, once per API
// server and scope (the namespace the question is about, "" for all):
// a context that repeats another's is named on standard error, not asked.
func askFleet[T any](ctx context.Context, o *Options, f *fleetFlags, opts fleet.Options, scope func(fleet.Member) string, ask func(context.Context, fleet.Member) (T, error)) ([]fleet.Result[T], error) {
	ms, err := f.members(o)
	if err != nil {
		return nil, err
	}
	ms, repeats := fleet.Distinct(ms, scope)
	for _, r := range repeats {
		fmt.Fprintf(o.ErrOut, "%s reaches the API server %s as %s does: asked once, as %s\n", r.Member.Name, r.Member.Server(), r.Of, r.Of)
	}
	return fleet.Ask(ctx, ms, opts, func(ctx context.Context, m fleet.Member) (T, error) {
		v, err := ask(ctx, m)
		if !m.Live() {
			// The snapshot is garbage now: collect it before the next one
			// is read, so that a fleet holds one snapshot's memory, not
			// the collector's allowance of two.
			runtime.GC()
		}
		return v, err
	}), nil
}

// readMember reads what a plan or a lint needs of one member: the
// cluster's objects (the workloads of namespaces) and the version its API
// server runs, or its snapshot.
func readMember(ctx context.Context, o *Options, m fleet.Member, timeout time.Duration, namespaces []string) (*Cluster, string, error) {
	if !m.Live() {
		c, err := ReadClusterDir(m.SnapshotDir)
		return c, "", err
	}
	c, version, err := memberClient(ctx, o, m, timeout)
	if err != nil {
		return nil, "", err
	}
	cluster, err := ReadCluster(ctx, c, namespaces...)
	return cluster, version, err
}

// completeContexts completes --contexts with the kubeconfig's context
// names.
func completeContexts(o *Options) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		raw, err := o.Config.ToRawKubeConfigLoader().RawConfig()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		names := make([]string, 0, len(raw.Contexts))
		for name := range raw.Contexts {
			names = append(names, name)
		}
		slices.Sort(names)
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}
