package plugin

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/fleet"
)

// FleetStatus is every matching migration across a fleet, one row each,
// and one row for a cluster without any: not installed, none found, or
// the error that stopped the read.
type FleetStatus struct {
	Rows []FleetStatusRow `json:"rows"`
}

// FleetStatusRow is one migration on one cluster, or the cluster alone.
type FleetStatusRow struct {
	Cluster           string `json:"cluster"`
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	Namespace         string `json:"namespace,omitempty"`
	Name              string `json:"name,omitempty"`
	Phase             string `json:"phase,omitempty"`
	Stage             string `json:"stage,omitempty"`
	// Current is whether the status is about the spec's generation: a
	// migration that succeeded for an older spec is not done.
	Current bool `json:"current"`
	// Reason and Message are the Ready condition's: why it is where it is.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	Age     string `json:"age,omitempty"`
	// Note is "not installed" for a cluster without the CRD, "none found"
	// for one without a matching migration; Error why it was not read.
	Note  string `json:"note,omitempty"`
	Error string `json:"error,omitempty"`
}

// statusQuery is what status asks each cluster: one name, or every
// migration the label selector matches, in one namespace or all.
type statusQuery struct {
	name          string
	selector      labels.Selector
	allNamespaces bool
}

// runFleetStatus lists the migrations the query matches on every cluster.
func runFleetStatus(ctx context.Context, o *Options, f *fleetFlags, q statusQuery, output string) error {
	if err := checkOutput(output, outputTable, outputYAML, outputJSON); err != nil {
		return err
	}
	now := time.Now()
	results, err := askFleet(ctx, o, f, func(ctx context.Context, m fleet.Member) ([]FleetStatusRow, error) {
		return memberStatus(ctx, o, f, q, m, now)
	})
	if err != nil {
		return err
	}
	var st FleetStatus
	failed := false
	for _, res := range results {
		if res.Err != nil {
			failed = true
			st.Rows = append(st.Rows, FleetStatusRow{Cluster: res.Member.Name, Error: res.Err.Error()})
			continue
		}
		st.Rows = append(st.Rows, res.Value...)
	}
	if err := printFleetStatus(o.Out, output, st); err != nil {
		return err
	}
	if failed {
		return errHazardsFound
	}
	return nil
}

// memberStatus reads one cluster's matching migrations.
func memberStatus(ctx context.Context, o *Options, f *fleetFlags, q statusQuery, m fleet.Member, now time.Time) ([]FleetStatusRow, error) {
	if !m.Live() {
		return nil, fmt.Errorf("status reads clusters, not snapshots")
	}
	c, version, err := memberClient(m, f.timeout)
	if err != nil {
		return nil, err
	}
	cluster := FleetStatusRow{Cluster: m.Name, KubernetesVersion: version}
	var opts []client.ListOption
	ns := fleetNamespace(o, m)
	if !q.allNamespaces {
		opts = append(opts, client.InNamespace(ns))
	}
	if q.selector != nil && !q.selector.Empty() {
		opts = append(opts, client.MatchingLabelsSelector{Selector: q.selector})
	}
	var list pgv1.PlacementMigrationList
	if err := c.List(ctx, &list, opts...); err != nil {
		if meta.IsNoMatchError(err) {
			cluster.Note = "not installed: the cluster does not serve PlacementMigrations"
			return []FleetStatusRow{cluster}, nil
		}
		return nil, fmt.Errorf("list PlacementMigrations: %w", err)
	}
	var rows []FleetStatusRow
	for i := range list.Items {
		pm := &list.Items[i]
		if q.name != "" && pm.Name != q.name {
			continue
		}
		rows = append(rows, statusRow(cluster, pm, now))
	}
	if len(rows) == 0 {
		cluster.Note = "none found"
		if q.name != "" {
			cluster.Note = fmt.Sprintf("no PlacementMigration %q in namespace %s", q.name, ns)
		}
		return []FleetStatusRow{cluster}, nil
	}
	return rows, nil
}

// statusRow is one migration's row.
func statusRow(cluster FleetStatusRow, pm *pgv1.PlacementMigration, now time.Time) FleetStatusRow {
	row := cluster
	row.Namespace, row.Name = pm.Namespace, pm.Name
	row.Phase, row.Stage = string(pm.Status.Phase), string(pm.Status.Stage)
	row.Current = pm.Status.ObservedGeneration == pm.Generation
	row.Age = ago(pm.CreationTimestamp.Time, now)
	if ready := meta.FindStatusCondition(pm.Status.Conditions, pgv1.ConditionReady); ready != nil {
		row.Reason, row.Message = ready.Reason, ready.Message
		row.Current = row.Current && ready.ObservedGeneration == pm.Generation
	}
	return row
}

func printFleetStatus(w io.Writer, format string, st FleetStatus) error {
	if format == outputJSON || format == outputYAML {
		return encode(w, format, st)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tVERSION\tNAMESPACE\tNAME\tPHASE\tSTAGE\tCURRENT\tAGE\tREASON")
	for _, r := range st.Rows {
		if r.Name == "" {
			detail := r.Note
			if r.Error != "" {
				detail = "error: " + r.Error
			}
			fmt.Fprintf(tw, "%s\t%s\t\t\t\t\t\t\t%s\n", r.Cluster, orNone(r.KubernetesVersion), detail)
			continue
		}
		reason := r.Reason
		if r.Message != "" {
			reason += ": " + r.Message
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Cluster, orNone(r.KubernetesVersion), r.Namespace, r.Name,
			orNone(r.Phase), orNone(r.Stage), yesNo(r.Current), r.Age, orNone(reason))
	}
	return tw.Flush()
}
