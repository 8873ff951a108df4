package plugin

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
	"github.com/placement-guard/placement-guard/internal/targets"
)

// Cluster is what the plugin knows of a cluster: read from the API with
// get and list only, or from a directory of YAML.
type Cluster struct {
	placement.Objects
	// Workloads are the objects of the kinds the project migrates.
	Workloads   []client.Object
	ReplicaSets []*appsv1.ReplicaSet
	Migrations  []*pgv1.PlacementMigration
	// Budgets and Autoscalers decide how the targets are disrupted: the
	// hard stage's pre-flight asks about them, as the operator's does.
	Budgets     []*policyv1.PodDisruptionBudget
	Autoscalers []*autoscalingv2.HorizontalPodAutoscaler

	// Skipped names the objects the engine could not index, with why: a
	// pod whose anti-affinity selector does not parse (the API server
	// refuses those, a hand-edited snapshot may not). The plan goes on
	// without them, as the operator does, and says so.
	Skipped []string

	// snap is the engine's index of the objects, when it was built while
	// they were read.
	snap *placement.Snapshot
	// profiles are the scheduler profiles the engine predicts with; nil
	// for the default one alone.
	profiles *placement.Profiles
}

// UseProfiles makes every snapshot of the cluster predict with the
// scheduler profiles ps, each pod with the one it names.
func (c *Cluster) UseProfiles(ps *placement.Profiles) {
	c.profiles = ps
	if c.snap != nil {
		c.snap.SetProfiles(ps)
	}
}

// withProfiles sets the cluster's profiles on a snapshot of it.
func (c *Cluster) withProfiles(snap *placement.Snapshot) *placement.Snapshot {
	if c.profiles != nil {
		snap.SetProfiles(c.profiles)
	}
	return snap
}

// ReadClusterDir reads a snapshot directory into a Cluster, indexing the
// objects for the engine while the rest are still being decoded.
func ReadClusterDir(dir string) (*Cluster, error) {
	raws, err := readDirDocuments(dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{}
	if c.snap, err = placement.NewSnapshot(placement.Objects{}); err != nil {
		return nil, err
	}
	err = decodeStream(raws, func(d Document) error {
		c.add(d.Object)
		c.index(d.Object)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// index adds an object the engine reads to the snapshot; one it cannot
// index is skipped and named in Skipped.
func (c *Cluster) index(o any) {
	obj, ok := o.(apiruntime.Object)
	if !ok {
		return
	}
	if k := placement.KindOfObject(obj); k != nil {
		if err := k.Upsert(c.snap, obj); err != nil {
			c.Skipped = append(c.Skipped, err.Error())
		}
	}
}

// Snapshot is the engine's index of the cluster. Pods are indexed one by
// one so that one the engine cannot index is skipped, not fatal.
func (c *Cluster) Snapshot() (*placement.Snapshot, error) {
	if c.snap != nil {
		return c.snap, nil
	}
	objs := c.Objects
	objs.Pods = nil
	snap, err := placement.NewSnapshot(objs)
	if err != nil {
		return nil, fmt.Errorf("index the cluster: %w", err)
	}
	c.snap = c.withProfiles(snap)
	for _, p := range c.Pods {
		c.index(p)
	}
	return snap, nil
}

// freshSnapshot is an index of the cluster of its own, which a simulation
// may change without changing what Snapshot answers.
func (c *Cluster) freshSnapshot() (*placement.Snapshot, error) {
	objs := c.Objects
	objs.Pods = nil
	snap, err := placement.NewSnapshot(objs)
	if err != nil {
		return nil, fmt.Errorf("index the cluster: %w", err)
	}
	for _, p := range c.Pods {
		// A pod the engine cannot index was skipped, and said so, by
		// Snapshot already.
		_ = snap.UpsertPod(p)
	}
	return c.withProfiles(snap), nil
}

// ClusterOf sorts documents into a Cluster; other kinds are ignored.
func ClusterOf(docs []Document) *Cluster {
	c := &Cluster{}
	for _, d := range docs {
		c.add(d.Object)
	}
	return c
}

func (c *Cluster) add(o any) {
	// A kind the engine reads may be the plan's too: a StatefulSet is a
	// target, a ReplicaSet a Deployment's revision.
	if obj, ok := o.(apiruntime.Object); ok {
		c.Collect(obj)
	}
	if targets.KindOf(o) != nil {
		c.Workloads = append(c.Workloads, o.(client.Object))
		return
	}
	switch o := o.(type) {
	case *appsv1.ReplicaSet:
		c.ReplicaSets = append(c.ReplicaSets, o)
	case *pgv1.PlacementMigration:
		c.Migrations = append(c.Migrations, o)
	case *policyv1.PodDisruptionBudget:
		c.Budgets = append(c.Budgets, o)
	case *autoscalingv2.HorizontalPodAutoscaler:
		c.Autoscalers = append(c.Autoscalers, o)
	}
}

// migrationsIn are the namespace's PlacementMigrations, as the operator
// lists them to judge one against the others.
func (c *Cluster) migrationsIn(namespace string) []pgv1.PlacementMigration {
	var out []pgv1.PlacementMigration
	for _, pm := range inNamespace(c.Migrations, namespace) {
		out = append(out, *pm)
	}
	return out
}

// withLiveStatus is a manifest's migration as applying it would leave it:
// a manifest carries no status, and kubectl apply keeps the live one's, so
// the migration of that name in the cluster lends its status, identity and
// generation (the next one when the spec differs). A migration with a
// status of its own, or none live, is returned as it is.
func (c *Cluster) withLiveStatus(pm *pgv1.PlacementMigration) *pgv1.PlacementMigration {
	if pm.Status.Phase != "" || pm.Status.ObservedGeneration != 0 || len(pm.Status.Conditions) > 0 {
		return pm
	}
	for _, live := range c.Migrations {
		if live.Namespace != pm.Namespace || live.Name != pm.Name {
			continue
		}
		applied := pm.DeepCopy()
		applied.UID, applied.CreationTimestamp, applied.Generation = live.UID, live.CreationTimestamp, live.Generation
		if !equality.Semantic.DeepEqual(applied.Spec, live.Spec) {
			applied.Generation++
		}
		applied.Status = *live.Status.DeepCopy()
		return applied
	}
	return pm
}

// policiesIn are the namespace's disruption budgets and autoscalers.
func (c *Cluster) policiesIn(namespace string) planning.Policies {
	var p planning.Policies
	for _, b := range inNamespace(c.Budgets, namespace) {
		p.Budgets = append(p.Budgets, *b)
	}
	for _, a := range inNamespace(c.Autoscalers, namespace) {
		p.Autoscalers = append(p.Autoscalers, *a)
	}
	return p
}

// protectedPods are the pods of the migration's namespace that its
// guards.protectedPods selects, terminating ones aside, as the operator
// reads them from its engine's records.
func (c *Cluster) protectedPods(pm *pgv1.PlacementMigration) ([]*corev1.Pod, error) {
	sel := pm.Spec.Protected()
	if sel == nil {
		return nil, nil
	}
	selector, err := metav1.LabelSelectorAsSelector(sel.AsMeta())
	if err != nil {
		return nil, fmt.Errorf("guards.protectedPods: %w", err)
	}
	var out []*corev1.Pod
	for _, p := range inNamespace(c.Pods, pm.Namespace) {
		if p.DeletionTimestamp == nil && selector.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out, nil
}

// Inventory is the namespace's part of the cluster the targets resolve in.
func (c *Cluster) Inventory(namespace string) planning.Inventory {
	return planning.Inventory{
		Workloads:   inNamespace(c.Workloads, namespace),
		ReplicaSets: inNamespace(c.ReplicaSets, namespace),
		Pods:        inNamespace(c.Pods, namespace),
	}
}

func inNamespace[T interface{ GetNamespace() string }](items []T, namespace string) []T {
	var out []T
	for _, it := range items {
		if it.GetNamespace() == namespace {
			out = append(out, it)
		}
	}
	return out
}

// ReadCluster reads from the API what a plan needs, with list only: every
// node, pod, namespace and storage object, and the workloads of the given
// namespaces. The read is as wide as the scheduler's view, because another
// namespace's pods count for anti-affinity and for node resources.
func ReadCluster(ctx context.Context, c client.Reader, namespaces ...string) (*Cluster, error) {
	cl := &Cluster{}
	type list struct {
		what string
		list client.ObjectList
		opts []client.ListOption
		// optional lists may be missing: a cluster without the CRD has no
		// migration, and is planned all the same.
		optional bool
	}
	var lists []list
	listed := map[string]bool{}
	for _, k := range targets.Kinds() {
		listed[k.Resource] = true
	}
	for _, k := range placement.ObjectKinds {
		if !k.PerNamespace {
			lists = append(lists, list{k.Resource, k.NewList().(client.ObjectList), nil, false})
		}
	}
	for _, ns := range namespaces {
		in := []client.ListOption{client.InNamespace(ns)}
		for _, k := range targets.Kinds() {
			lists = append(lists, list{k.Resource + " in " + ns, k.NewList(), in, false})
		}
		// What spreads the namespace's pods by default, a target kind
		// (StatefulSets) listed once.
		for _, k := range placement.ObjectKinds {
			if k.PerNamespace && !listed[k.Resource] {
				lists = append(lists, list{k.Resource + " in " + ns, k.NewList().(client.ObjectList), in, false})
			}
		}
		lists = append(lists,
			list{"placementmigrations in " + ns, &pgv1.PlacementMigrationList{}, in, true},
			list{"poddisruptionbudgets in " + ns, &policyv1.PodDisruptionBudgetList{}, in, false},
			list{"horizontalpodautoscalers in " + ns, &autoscalingv2.HorizontalPodAutoscalerList{}, in, false})
	}
	for _, l := range lists {
		if err := c.List(ctx, l.list, l.opts...); err != nil {
			if l.optional && meta.IsNoMatchError(err) {
				continue
			}
			return nil, fmt.Errorf("list %s: %w", l.what, err)
		}
		if err := meta.EachListItem(l.list, func(o apiruntime.Object) error {
			cl.add(o)
			return nil
		}); err != nil {
			return nil, fmt.Errorf("list %s: %w", l.what, err)
		}
	}
	return cl, nil
}
