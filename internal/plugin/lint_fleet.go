package plugin

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/placement-guard/placement-guard/internal/fleet"
)

// FleetLint is rendered manifests judged against every cluster of a fleet.
type FleetLint struct {
	Rows  []FleetLintRow `json:"rows"`
	Worst fleet.Level    `json:"worst"`
}

// FleetLintRow is one cluster's findings.
type FleetLintRow struct {
	Cluster           string      `json:"cluster"`
	KubernetesVersion string      `json:"kubernetesVersion,omitempty"`
	Level             fleet.Level `json:"level"`
	Findings          []Finding   `json:"findings"`
	Error             string      `json:"error,omitempty"`
}

// manifestNamespaces are the namespaces the manifests' objects go to.
func manifestNamespaces(docs []Document, fallback string) []string {
	var out []string
	seen := map[string]bool{}
	for _, d := range docs {
		ns := fallback
		if m, err := meta.Accessor(d.Object); err == nil && m.GetNamespace() != "" {
			ns = m.GetNamespace()
		}
		if !seen[ns] {
			seen[ns] = true
			out = append(out, ns)
		}
	}
	return out
}

// copyDocuments gives each cluster its own objects: lint may default them.
func copyDocuments(docs []Document) []Document {
	out := make([]Document, len(docs))
	for i, d := range docs {
		out[i] = d
		out[i].Object = d.Object.DeepCopyObject()
	}
	return out
}

// runFleetLint judges the manifests against every cluster of the fleet.
func runFleetLint(ctx context.Context, o *Options, f *fleetFlags, docs []Document, ns, output string) error {
	threshold, err := f.threshold()
	if err != nil {
		return err
	}
	results, err := askFleet(ctx, o, f, f.options(), func(fleet.Member) string { return "" }, func(ctx context.Context, m fleet.Member) (FleetLintRow, error) {
		row := FleetLintRow{Cluster: m.Name}
		cluster, version, err := readMember(ctx, o, m, f.timeout, manifestNamespaces(docs, ns))
		if err != nil {
			return row, err
		}
		row.KubernetesVersion = version
		if row.Findings, err = Lint(copyDocuments(docs), LintOptions{Namespace: ns, Cluster: cluster}); err != nil {
			return row, err
		}
		row.Level = findingsLevel(row.Findings)
		return row, nil
	})
	if err != nil {
		return err
	}
	var fl FleetLint
	for _, res := range results {
		row := res.Value
		row.Cluster = res.Member.Name
		if res.Err != nil {
			row.Level, row.Error, row.Findings = fleet.Unknown, res.Err.Error(), nil
		}
		if row.Findings == nil {
			row.Findings = []Finding{}
		}
		fl.Rows = append(fl.Rows, row)
		fl.Worst = fleet.Worst(fl.Worst, row.Level)
	}
	if err := printFleetLint(o.Out, output, fl); err != nil {
		return err
	}
	if fleet.Fails(fl.Worst, threshold) {
		return errHazardsFound
	}
	return nil
}

// findingsLevel is Blocked for a blocking finding, Warn for another.
func findingsLevel(fs []Finding) fleet.Level {
	l := fleet.OK
	for _, f := range fs {
		if f.Blocking {
			return fleet.Blocked
		}
		l = fleet.Warn
	}
	return l
}

func printFleetLint(w io.Writer, format string, fl FleetLint) error {
	switch format {
	case outputJSON, outputYAML:
		return encode(w, format, fl)
	case outputGitHub:
		for _, r := range fl.Rows {
			if r.Error != "" {
				fmt.Fprintf(w, "::error title=%s::%s\n", escapeProperty(r.Cluster+": not judged"), escapeData(r.Error))
			}
			for _, f := range r.Findings {
				level := "warning"
				if f.Blocking {
					level = "error"
				}
				fmt.Fprintf(w, "::%s file=%s,line=%d,title=%s::%s\n", level, escapeProperty(f.File), f.Line,
					escapeProperty(r.Cluster+": "+f.Type+" in "+f.Object), escapeData(f.Message))
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tVERSION\tLEVEL\tBLOCKING\tINFO\tFIRST FINDING OR ERROR")
	for _, r := range fl.Rows {
		blocking, info := 0, 0
		first := r.Error
		for _, f := range r.Findings {
			if f.Blocking {
				blocking++
			} else {
				info++
			}
			if first == "" || (f.Blocking && blocking == 1) {
				first = fmt.Sprintf("%s in %s (%s:%d): %s", f.Type, f.Object, f.File, f.Line, f.Message)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", r.Cluster, orNone(r.KubernetesVersion), r.Level, blocking, info, orNone(first))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nWorst: %s\n", fl.Worst)
	return err
}
