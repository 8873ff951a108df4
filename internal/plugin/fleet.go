package plugin

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/fleet"
)

// fleetFlags choose the clusters a command asks instead of the current
// context: several contexts, every context, a directory of kubeconfigs or
// (for plan) a directory of snapshots.
type fleetFlags struct {
	allContexts   bool
	kubeconfigDir string
	snapshotDir   string
	parallel      int
	timeout       time.Duration
	failOn        string
}

func (f *fleetFlags) add(fl *pflag.FlagSet, snapshots bool) {
	fl.BoolVar(&f.allContexts, "all-contexts", false, "ask every context of the kubeconfig, one row per cluster")
	fl.StringVar(&f.kubeconfigDir, "kubeconfig-dir", "", "ask the cluster of every kubeconfig file in this directory (its current context), one row per file")
	if snapshots {
		fl.StringVar(&f.snapshotDir, "snapshot-dir", "", "plan against every snapshot in this directory, one subdirectory per cluster, offline")
	}
	fl.IntVar(&f.parallel, "parallel", 0, "clusters asked at once, with a fleet (default 4 clusters, or 1 snapshot: each snapshot's read already uses every core, and one at a time bounds the memory to one snapshot's)")
	fl.DurationVar(&f.timeout, "cluster-timeout", 30*time.Second, "how long one cluster of a fleet may take before its row says it did not answer")
}

// contextList is --context split at commas: more than one name asks a
// fleet.
func contextList(o *Options) []string {
	if o.Config.Context == nil {
		return nil
	}
	var out []string
	for _, name := range strings.Split(*o.Config.Context, ",") {
		if name = strings.TrimSpace(name); name != "" {
			out = append(out, name)
		}
	}
	return out
}

// fleetMode reports whether the command asks a fleet rather than one
// cluster.
func (f *fleetFlags) fleetMode(o *Options) bool {
	return f.allContexts || f.kubeconfigDir != "" || f.snapshotDir != "" || len(contextList(o)) > 1
}

// members are the clusters the flags name; giving two ways at once is a
// usage error.
func (f *fleetFlags) members(o *Options) ([]fleet.Member, error) {
	ways := 0
	for _, set := range []bool{f.allContexts, f.kubeconfigDir != "", f.snapshotDir != "", len(contextList(o)) > 1} {
		if set {
			ways++
		}
	}
	if ways > 1 {
		return nil, usagef("name the fleet one way: --context a,b, --all-contexts, --kubeconfig-dir or --snapshot-dir")
	}
	switch {
	case f.snapshotDir != "":
		ms, err := fleet.SnapshotDir(f.snapshotDir)
		if err != nil {
			return nil, usageError{err}
		}
		return ms, nil
	case f.kubeconfigDir != "":
		ms, err := fleet.KubeconfigDir(f.kubeconfigDir)
		if err != nil {
			return nil, usageError{err}
		}
		return ms, nil
	}
	raw, err := o.Config.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil, usageError{fmt.Errorf("read the kubeconfig: %w", err)}
	}
	return fleet.Contexts(&raw, contextList(o), f.allContexts), nil
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
// fleet's timeout, and reads the version its API server runs.
func memberClient(m fleet.Member, timeout time.Duration) (client.Client, string, error) {
	cfg, err := m.RESTConfig()
	if err != nil {
		return nil, "", err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = timeout
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

// askFleet asks every member of the fleet the flags name.
func askFleet[T any](ctx context.Context, o *Options, f *fleetFlags, ask func(context.Context, fleet.Member) (T, error)) ([]fleet.Result[T], error) {
	ms, err := f.members(o)
	if err != nil {
		return nil, err
	}
	if len(ms) == 0 {
		return nil, usagef("the kubeconfig has no context")
	}
	return fleet.Ask(ctx, ms, f.options(), func(ctx context.Context, m fleet.Member) (T, error) {
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
func readMember(ctx context.Context, m fleet.Member, timeout time.Duration, namespaces []string) (*Cluster, string, error) {
	if !m.Live() {
		c, err := ReadClusterDir(m.SnapshotDir)
		return c, "", err
	}
	c, version, err := memberClient(m, timeout)
	if err != nil {
		return nil, "", err
	}
	cluster, err := ReadCluster(ctx, c, namespaces...)
	return cluster, version, err
}
