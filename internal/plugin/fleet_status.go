package plugin

import (
	"context"
	"fmt"
	"io"
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
	// Level ranks the row for --fail-on: OK when Ready for the current
	// spec, Blocked when Stalled for it, Warn otherwise (working, or no
	// migration there), Unknown when the cluster could not be read.
	Level fleet.Level `json:"level"`
}

// statusQuery is what status asks each cluster: one name, or every
// migration the label selector matches, in one namespace or all.
type statusQuery struct {
	name          string
	selector      labels.Selector
	allNamespaces bool
}

// statusPrint is how status prints: the format, wide or not, headers or
// not, and the level from which it exits 1 ("" for only clusters it could
// not read).
type statusPrint struct {
	output    string
	noHeaders bool
	failOn    string
}

// threshold is --fail-on: nil when only unreadable clusters fail.
func (p statusPrint) threshold() (*fleet.Level, error) {
	if p.failOn == "" {
		return nil, nil
	}
	l, err := fleet.ParseThreshold(p.failOn)
	if err != nil {
		return nil, usageError{err}
	}
	return &l, nil
}

// runFleetStatus lists the migrations the query matches on every cluster.
func runFleetStatus(ctx context.Context, o *Options, f *fleetFlags, q statusQuery, p statusPrint) error {
	if err := checkOutput(p.output, outputTable, outputWide, outputYAML, outputJSON); err != nil {
		return err
	}
	threshold, err := p.threshold()
	if err != nil {
		return err
	}
	now := time.Now()
	results, err := askFleet(ctx, o, f, f.options(), q.scope(o), func(ctx context.Context, m fleet.Member) ([]FleetStatusRow, error) {
		return memberStatus(ctx, o, f, q, m, now)
	})
	if err != nil {
		return err
	}
	var st FleetStatus
	worst := fleet.OK
	for _, res := range results {
		rows := res.Value
		if res.Err != nil {
			rows = []FleetStatusRow{{Cluster: res.Member.Name, Error: res.Err.Error(), Level: fleet.Unknown}}
		}
		for _, r := range rows {
			worst = fleet.Worst(worst, r.Level)
		}
		st.Rows = append(st.Rows, rows...)
	}
	if err := printFleetStatus(o.Out, p, st); err != nil {
		return err
	}
	if worst == fleet.Unknown || (threshold != nil && fleet.Fails(worst, *threshold)) {
		return errHazardsFound
	}
	return nil
}

// scope is the namespace a status question is about on a member, "" for
// every namespace: two contexts to one server with one scope are asked
// once.
func (q statusQuery) scope(o *Options) func(fleet.Member) string {
	return func(m fleet.Member) string {
		if q.allNamespaces {
			return ""
		}
		return fleetNamespace(o, m)
	}
}

// memberStatus reads one cluster's matching migrations.
func memberStatus(ctx context.Context, o *Options, f *fleetFlags, q statusQuery, m fleet.Member, now time.Time) ([]FleetStatusRow, error) {
	if !m.Live() {
		return nil, fmt.Errorf("status reads clusters, not snapshots")
	}
	c, version, err := memberClient(ctx, o, m, f.timeout)
	if err != nil {
		return nil, err
	}
	cluster := FleetStatusRow{Cluster: m.Name, KubernetesVersion: version, Level: fleet.Warn}
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
	row.Level = migrationLevel(pm)
	if ready := meta.FindStatusCondition(pm.Status.Conditions, pgv1.ConditionReady); ready != nil {
		row.Reason, row.Message = ready.Reason, ready.Message
		row.Current = row.Current && ready.ObservedGeneration == pm.Generation
	}
	return row
}

func printFleetStatus(w io.Writer, p statusPrint, st FleetStatus) error {
	if p.output == outputJSON || p.output == outputYAML {
		return encode(w, p.output, st)
	}
	wide := p.output == outputWide
	t := newTable(w, p.noHeaders)
	columns := []string{"CLUSTER", "VERSION", "NAMESPACE", "NAME", "PHASE", "STAGE", "CURRENT", "AGE", "REASON"}
	if wide {
		columns = append(columns, "LEVEL", "MESSAGE")
	}
	t.header(columns...)
	for _, r := range st.Rows {
		cells := []string{r.Cluster, r.KubernetesVersion, r.Namespace, r.Name, r.Phase, r.Stage, yesNo(r.Current), r.Age, r.Reason}
		if r.Name == "" {
			detail := r.Note
			if r.Error != "" {
				detail = "error: " + r.Error
			}
			cells = []string{r.Cluster, orNoneCell(r.KubernetesVersion), "", "", "", "", "", "", detail}
			if wide {
				cells = append(cells, r.Level.String(), "")
			}
			t.line(cells...)
			continue
		}
		if wide {
			cells = append(cells, r.Level.String(), r.Message)
		}
		t.row(cells...)
	}
	return t.flush()
}
