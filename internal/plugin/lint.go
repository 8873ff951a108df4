package plugin

import (
	"fmt"
	"sort"
	"strconv"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
	"github.com/placement-guard/placement-guard/internal/targets"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Finding is one hazard lint found in a manifest.
type Finding struct {
	File     string `json:"file"`
	Line     int    `json:"line"`
	Object   string `json:"object"`
	Type     string `json:"type"`
	Blocking bool   `json:"blocking"`
	Message  string `json:"message"`
}

// LintOptions say what lint knows of the cluster besides the manifests.
type LintOptions struct {
	// Namespace is the namespace of manifest objects that name none.
	Namespace string
	// Nodes is how many identical nodes to assume when there is no
	// snapshot; 0 for none, which limits lint to the findings that need
	// no nodes.
	Nodes int
	// Zones are the zones the assumed nodes are spread over, round robin;
	// none leaves them without a zone, and zone constraints unjudged.
	Zones []string
	// Cluster is a snapshot of the cluster the manifests go to; nil for none.
	Cluster *Cluster
}

// manifestWorkload is a workload of the manifests and where it was written.
type manifestWorkload struct {
	doc      Document
	workload *placement.Workload
	// pods are the workload's pods as lint placed them, or the live ones.
	pods []*corev1.Pod
}

// lintRevision marks the pods lint places for a workload: the revision
// that runs before the manifests are applied.
const lintRevision = "placement-guard-lint"

// Lint judges every hard anti-affinity term and DoNotSchedule spread of
// the manifests' workloads, and every PlacementMigration of the manifests,
// with the operator's engine. Each workload's pods are placed first, as
// they would run without the constraint judged; the constraint is then
// rolled out over them. Without nodes only the findings that need none
// (selector overlap, clobbering) are reported.
func Lint(docs []Document, opts LintOptions) ([]Finding, error) {
	base := placement.Objects{}
	var existing *Cluster
	if opts.Cluster != nil {
		base, existing = opts.Cluster.Objects, opts.Cluster
	} else {
		base.Nodes = syntheticNodes(opts.Nodes, opts.Zones)
	}
	snap, err := placement.NewSnapshot(base)
	if err != nil {
		return nil, fmt.Errorf("index the snapshot: %w", err)
	}
	withNodes := snap.NodeCount() > 0
	workloads, err := placeWorkloads(snap, docs, opts.Namespace, existing)
	if err != nil {
		return nil, err
	}
	migrations := manifestMigrations(docs, opts)
	policies := lintPolicies(docs, opts)
	var findings []Finding
	for _, mw := range workloads {
		ch := planning.Change{Target: manifestTarget(mw).Target, Migrations: migrationsIn(migrations, mw.workload.Namespace), Policies: policies(mw.workload.Namespace), Preflight: true}
		judged, err := planning.JudgeChange(snap, ch, func(c placement.Constraint) bool { return withNodes && opts.knows(c) })
		if err != nil {
			return nil, err
		}
		for _, f := range judged {
			at := mw.doc
			at.Line = mw.doc.LineOf(fieldOf(f.Constraint))
			findings = append(findings, findingsAt(at, f.Hazards)...)
		}
	}
	for _, d := range docs {
		if pm, ok := d.Object.(*pgv1.PlacementMigration); ok {
			fs, err := lintMigration(snap, withNodes && opts.knows(planning.ConstraintFromSpec(pm.Spec.Constraint)), d, pm, workloads, migrations, policies, opts.Namespace)
			if err != nil {
				return nil, err
			}
			findings = append(findings, fs...)
		}
	}
	return uniqueFindings(findings), nil
}

// knows reports whether lint knows the topology a constraint is over: a
// snapshot's nodes, or the keys its synthetic nodes carry.
func (o LintOptions) knows(c placement.Constraint) bool {
	return o.Cluster != nil || syntheticKeys(o.Zones)[c.TopologyKey()]
}

// lintMigration judges a migration of the manifests against the manifests'
// workloads it targets, at both stages: with nodes, the operator's one
// question (planning.EvaluateStages); without, the findings that need none.
func lintMigration(snap *placement.Snapshot, withNodes bool, d Document, pm *pgv1.PlacementMigration, workloads []manifestWorkload, migrations []pgv1.PlacementMigration, policies func(namespace string) planning.Policies, defaultNS string) ([]Finding, error) {
	pm = pm.DeepCopy()
	pm.Namespace = namespaceOr(pm.Namespace, defaultNS)
	ns := pm.Namespace
	var objects []client.Object
	byRef := map[pgv1.TargetRef]manifestWorkload{}
	for _, mw := range workloads {
		if mw.workload.Namespace != ns {
			continue
		}
		byRef[mw.workload.Ref()] = mw
		objects = append(objects, mw.doc.Object.(client.Object))
	}
	refs, err := planning.TargetRefs(pm.Spec, objects)
	if err != nil {
		return []Finding{{File: d.File, Line: d.Line, Object: objectName(d), Type: "InvalidSpec", Blocking: true, Message: err.Error()}}, nil
	}
	others := migrationsIn(migrations, ns)
	intent := planning.IntentOf(pm)
	if claim := planning.ClaimOf(intent, others, refs); claim != nil {
		return []Finding{{File: d.File, Line: d.Line, Object: objectName(d), Type: pgv1.ReasonTargetClaimed, Blocking: true, Message: claim.Message()}}, nil
	}
	var found []*planning.Target
	for _, ref := range refs {
		if mw, ok := byRef[ref]; ok {
			found = append(found, manifestTarget(mw))
		}
	}
	if len(found) == 0 {
		return nil, nil
	}
	c := intent.Constraint
	planning.Render(found, c)
	if !withNodes {
		ws := make([]*placement.Workload, len(found))
		for i, t := range found {
			ws[i] = t.Workload
		}
		hs, err := planning.Judge(snap, false, placement.Question{Workloads: ws, Constraint: c, Capacity: intent.Capacity}, planning.Stages(intent.Final))
		return findingsAt(d, hs), err
	}
	sit := planning.Situation{Intent: intent, Targets: found, Others: others, Policies: policies(ns)}
	verdicts, err := planning.EvaluateStages(snap, sit)
	if err != nil {
		return nil, err
	}
	var hs []placement.Hazard
	for _, v := range verdicts {
		if v.Claim != nil {
			return []Finding{{File: d.File, Line: d.Line, Object: objectName(d), Type: pgv1.ReasonTargetClaimed, Blocking: true, Message: v.Claim.Message()}}, nil
		}
		hs = append(hs, v.Answers[0].Hazards...)
		if h := planning.PreflightOf(sit, v); h != nil {
			hs = append(hs, *h)
		}
	}
	return findingsAt(d, hs), nil
}

// manifestTarget is a manifest's workload as a target, with the pods lint
// placed for it or the live ones.
func manifestTarget(mw manifestWorkload) *planning.Target {
	t := targets.Build(mw.doc.Object.(client.Object), nil, nil)
	t.Workload, t.Pods = mw.workload, mw.pods
	return &planning.Target{Target: t, Ref: t.Workload.Ref()}
}

// migrationsIn are the migrations of one namespace.
func migrationsIn(migrations []pgv1.PlacementMigration, namespace string) []pgv1.PlacementMigration {
	var out []pgv1.PlacementMigration
	for _, o := range migrations {
		if o.Namespace == namespace {
			out = append(out, o)
		}
	}
	return out
}

// lintPolicies are the disruption budgets and autoscalers of a namespace,
// the manifests' and the snapshot's.
func lintPolicies(docs []Document, opts LintOptions) func(namespace string) planning.Policies {
	return func(namespace string) planning.Policies {
		var p planning.Policies
		if opts.Cluster != nil {
			p = opts.Cluster.policiesIn(namespace)
		}
		for _, d := range docs {
			switch o := d.Object.(type) {
			case *policyv1.PodDisruptionBudget:
				if namespaceOr(o.Namespace, opts.Namespace) == namespace {
					p.Budgets = append(p.Budgets, *o)
				}
			case *autoscalingv2.HorizontalPodAutoscaler:
				if namespaceOr(o.Namespace, opts.Namespace) == namespace {
					p.Autoscalers = append(p.Autoscalers, *o)
				}
			}
		}
		return p
	}
}

// manifestMigrations are the migrations lint judges each one against:
// those of the snapshot (what runs) and those of the manifests, each in its
// namespace, a manifest's replacing the snapshot's of the same name.
func manifestMigrations(docs []Document, opts LintOptions) []pgv1.PlacementMigration {
	byKey := map[string]pgv1.PlacementMigration{}
	var order []string
	add := func(pm pgv1.PlacementMigration) {
		pm.Namespace = namespaceOr(pm.Namespace, opts.Namespace)
		key := pm.Namespace + "/" + pm.Name
		if _, seen := byKey[key]; !seen {
			order = append(order, key)
		}
		byKey[key] = pm
	}
	if opts.Cluster != nil {
		for _, pm := range opts.Cluster.Migrations {
			add(*pm)
		}
	}
	for _, d := range docs {
		if pm, ok := d.Object.(*pgv1.PlacementMigration); ok {
			add(*pm)
		}
	}
	out := make([]pgv1.PlacementMigration, len(order))
	for i, key := range order {
		out[i] = byKey[key]
	}
	return out
}

// fieldOf is the template field that holds the constraint.
func fieldOf(c placement.Constraint) string {
	if c.Spread != nil {
		return "topologySpreadConstraints"
	}
	return "podAntiAffinity"
}

func findingsAt(d Document, hs []placement.Hazard) []Finding {
	out := make([]Finding, 0, len(hs))
	for _, h := range hs {
		out = append(out, Finding{File: d.File, Line: d.Line, Object: objectName(d), Type: h.Type, Blocking: h.Blocking, Message: h.Message})
	}
	return out
}

func objectName(d Document) string {
	kind := ""
	if k := targets.KindOf(d.Object); k != nil {
		kind = string(k.Name)
	} else if _, ok := d.Object.(*pgv1.PlacementMigration); ok {
		kind = "PlacementMigration"
	}
	if m, ok := d.Object.(metav1.Object); ok {
		return kind + "/" + m.GetName()
	}
	return kind
}

// uniqueFindings drops repeats (a workload with two hard terms may fail
// both for one reason) and orders by place.
func uniqueFindings(fs []Finding) []Finding {
	seen := map[string]bool{}
	var out []Finding
	for _, f := range fs {
		key := f.File + "\x00" + strconv.Itoa(f.Line) + "\x00" + f.Type + "\x00" + f.Message
		if !seen[key] {
			seen[key] = true
			out = append(out, f)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].File != out[j].File {
			return out[i].File < out[j].File
		}
		return out[i].Line < out[j].Line
	})
	return out
}
