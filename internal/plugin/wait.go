package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/fleet"
)

// waitPoll is how often wait reads each cluster's migrations again.
const waitPoll = 2 * time.Second

// waitQuery is what wait waits on: one name, the migrations a selector
// matches, or every migration (--all), in one namespace or all.
type waitQuery struct {
	statusQuery
	all  bool
	for_ waitFor
}

func newWaitCommand(o *Options) *cobra.Command {
	var (
		q        waitQuery
		forFlag  string
		selector string
		timeout  time.Duration
		fleetFl  fleetFlags
	)
	cmd := &cobra.Command{
		Use:   "wait [NAME | -l SELECTOR | --all] [--for=condition=Ready]",
		Short: "Wait until PlacementMigrations are Ready for their current spec, on one cluster or a fleet",
		Long: `wait returns once every migration it names meets the condition for its
current spec, as kubectl wait and argocd app wait --health do: status about
an older generation does not count. With --contexts, --all-contexts or
--kubeconfig-dir it waits on every cluster at once, one line per migration
as it meets the condition.

It exits 0 when every one met the condition, and 1 when the timeout came
first or a migration is Stalled while waiting for Ready (Blocked,
RolledBack, Failed, Degraded: a person, not time, moves it on), printing the
rows that did not. A migration that does not exist on a cluster, a cluster
without the CRD, and a selector that matches nothing are rows that fail at
once, not waits until the timeout.`,
		Example: `  kubectl placement wait -n db graphdb-apart
  kubectl placement wait -n db graphdb-apart --for=condition=Stalled --timeout=10m

  # Both clusters of a wave
  kubectl placement wait -n db graphdb-apart --contexts eu-1,us-1 --timeout=30m`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeMigrations(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			if fleetFl.listClusters {
				return listFleet(o, &fleetFl)
			}
			var err error
			if q.for_, err = parseWaitFor(forFlag); err != nil {
				return err
			}
			if q.selector, err = labels.Parse(selector); err != nil {
				return usagef("-l: %v", err)
			}
			named := 0
			for _, set := range []bool{len(args) == 1, selector != "", q.all} {
				if set {
					named++
				}
			}
			if named != 1 {
				return usagef("name what to wait on one way: a NAME, -l SELECTOR or --all")
			}
			if timeout < 0 {
				return usagef("--timeout must not be negative")
			}
			if len(args) == 1 {
				q.name = args[0]
			}
			return runWait(cmd.Context(), o, &fleetFl, q, timeout)
		},
	}
	cmd.Flags().StringVar(&forFlag, "for", "condition=Ready", "the condition to wait for: condition=Ready, condition=Stalled, or condition=TYPE[=STATUS]")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait in all; 0 looks once")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "wait on the migrations this label selector matches")
	cmd.Flags().BoolVar(&q.all, "all", false, "wait on every migration of the namespace")
	cmd.Flags().BoolVarP(&q.allNamespaces, "all-namespaces", "A", false, "look in every namespace")
	fleetFl.add(cmd, o, false)
	_ = cmd.RegisterFlagCompletionFunc("for", cobra.FixedCompletions([]string{"condition=Ready", "condition=Stalled"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// waitRow is one migration, or one cluster, that did not meet the
// condition: what wait prints when it fails.
type waitRow = FleetStatusRow

// runWait waits on the current cluster, or on every cluster of a fleet.
func runWait(ctx context.Context, o *Options, f *fleetFlags, q waitQuery, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	out := &lines{w: o.Out}
	var unmet []waitRow
	if !f.fleetMode() {
		ns, err := o.Namespace()
		if err != nil {
			return err
		}
		connect := func(context.Context) (client.Client, error) { return o.client() }
		unmet = waitOn(ctx, deadline, "", ns, connect, q, out)
	} else {
		opts := f.options()
		// Every cluster is waited on at once: the wait is on the clusters'
		// controllers, not on this machine.
		opts.Parallel, opts.Timeout = max(f.parallel, 1<<16), 0
		results, err := askFleet(ctx, o, f, opts, q.scope(o), func(ctx context.Context, m fleet.Member) ([]waitRow, error) {
			connect := func(ctx context.Context) (client.Client, error) {
				ctx, cancel := context.WithTimeout(ctx, f.timeout)
				defer cancel()
				c, _, err := memberClient(ctx, o, m, f.timeout)
				return c, err
			}
			return waitOn(ctx, deadline, m.Name, fleetNamespace(o, m), connect, q, out), nil
		})
		if err != nil {
			return err
		}
		for _, r := range results {
			if r.Err != nil {
				unmet = append(unmet, waitRow{Cluster: r.Member.Name, Error: r.Err.Error(), Level: fleet.Unknown})
				continue
			}
			unmet = append(unmet, r.Value...)
		}
	}
	if len(unmet) == 0 {
		return nil
	}
	fmt.Fprintln(o.Out)
	if err := printFleetStatus(o.Out, statusPrint{output: outputWide}, FleetStatus{Rows: unmet}); err != nil {
		return err
	}
	return failed{fmt.Errorf("%d row(s) did not meet %s within %s", len(unmet), q.for_, timeout)}
}

// waitOn waits on one cluster, reading its migrations every waitPoll until
// each meets the condition or fails, or the deadline passes (after one
// look at least); it prints a line for each met and returns the rows that
// were not. A cluster that cannot be read is read again until the
// deadline: an API server restarting is not a failed rollout.
func waitOn(ctx context.Context, deadline time.Time, cluster, ns string, connect func(context.Context) (client.Client, error), q waitQuery, out *lines) []waitRow {
	done := map[string]bool{}
	var c client.Client
	var last []waitRow
	for {
		rows, settled, err := lookOnce(ctx, cluster, ns, &c, connect, q, done, out)
		switch {
		case err != nil:
			last = []waitRow{{Cluster: cluster, Error: err.Error(), Level: fleet.Unknown}}
			c = nil
		case settled:
			return rows
		default:
			last = rows
		}
		left := time.Until(deadline)
		if left <= 0 {
			return last
		}
		select {
		case <-ctx.Done():
			return last
		case <-time.After(min(waitPoll, left)):
		}
	}
}

// lookOnce reads the cluster's migrations once. settled is true when
// nothing is left to wait for: every one met the condition or failed, or
// there is nothing to wait on (a row that fails now).
func lookOnce(ctx context.Context, cluster, ns string, c *client.Client, connect func(context.Context) (client.Client, error), q waitQuery, done map[string]bool, out *lines) (rows []waitRow, settled bool, err error) {
	if *c == nil {
		if *c, err = connect(ctx); err != nil {
			return nil, false, err
		}
	}
	here := FleetStatusRow{Cluster: cluster, Level: fleet.Warn}
	items, err := readWaited(ctx, *c, ns, q)
	switch {
	case meta.IsNoMatchError(err):
		here.Note = "not installed: the cluster does not serve PlacementMigrations"
		return []waitRow{here}, true, nil
	case apierrors.IsNotFound(err):
		here.Note = fmt.Sprintf("no PlacementMigration %q in namespace %s", q.name, ns)
		return []waitRow{here}, true, nil
	case apierrors.IsUnauthorized(err):
		// A credential that expired while waiting: connect again.
		*c = nil
		return nil, false, err
	case err != nil:
		return nil, false, err
	case len(items) == 0:
		here.Note = "none found"
		return []waitRow{here}, true, nil
	}
	now := time.Now()
	settled = true
	for i := range items {
		pm := &items[i]
		key := pm.Namespace + "/" + pm.Name
		row := statusRow(here, pm, now)
		switch {
		case done[key]:
		case q.for_.met(pm):
			done[key] = true
			out.met(cluster, pm.Name)
		case q.for_.failed(pm) != "":
			row.Reason, row.Message = "", q.for_.failed(pm)
			rows = append(rows, row)
		default:
			settled = false
			rows = append(rows, row)
		}
	}
	return rows, settled, nil
}

// readWaited reads the migrations q names on one cluster.
func readWaited(ctx context.Context, c client.Client, ns string, q waitQuery) ([]pgv1.PlacementMigration, error) {
	if q.name != "" {
		pm := &pgv1.PlacementMigration{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: q.name}, pm); err != nil {
			return nil, err
		}
		return []pgv1.PlacementMigration{*pm}, nil
	}
	var opts []client.ListOption
	if !q.allNamespaces {
		opts = append(opts, client.InNamespace(ns))
	}
	if !q.selector.Empty() {
		opts = append(opts, client.MatchingLabelsSelector{Selector: q.selector})
	}
	var list pgv1.PlacementMigrationList
	if err := c.List(ctx, &list, opts...); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// lines writes the "condition met" lines of clusters waited on at once,
// one whole line at a time.
type lines struct {
	mu sync.Mutex
	w  io.Writer
}

// met says, as kubectl wait does, that a migration met the condition;
// across a fleet the line starts with its cluster.
func (l *lines) met(cluster, name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	prefix := ""
	if cluster != "" {
		prefix = cluster + ": "
	}
	fmt.Fprintf(l.w, "%splacementmigration.%s/%s condition met\n", prefix, pgv1.GroupVersion.Group, name)
}

// failed is an outcome the command reports on standard error and exits 1
// for, after printing what it found.
type failed struct{ err error }

func (e failed) Error() string { return e.err.Error() }
func (e failed) Unwrap() error { return e.err }

// isFailed reports whether err is a failed outcome.
func isFailed(err error) bool {
	var f failed
	return errors.As(err, &f)
}
