package plugin

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
	"github.com/placement-guard/placement-guard/internal/targets"
)

// placeWorkloads adds the pods of every workload of the manifests to the
// snapshot. A workload the snapshot already runs keeps its live pods;
// another gets its replicas placed as the scheduler would place them
// without its hard constraints, or left unbound when there are no nodes.
func placeWorkloads(snap *placement.Snapshot, docs []Document, defaultNS string, existing *Cluster) ([]manifestWorkload, error) {
	var out []manifestWorkload
	for _, d := range docs {
		w := workloadOf(d.Object, defaultNS)
		if w == nil {
			continue
		}
		if existing != nil {
			if live := liveTarget(existing, w); live != nil {
				w.Pods, w.Revision = live.Workload.Pods, live.Workload.Revision
				out = append(out, manifestWorkload{doc: d, workload: w, pods: live.Pods})
				continue
			}
		}
		pods, err := placePods(snap, w)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", d.File, d.Line, err)
		}
		for _, p := range pods {
			if err := snap.UpsertPod(p); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", d.File, d.Line, err)
			}
			w.Pods = append(w.Pods, p.UID)
		}
		w.Revision = lintRevision
		out = append(out, manifestWorkload{doc: d, workload: w, pods: pods})
	}
	return out, nil
}

// liveTarget is the snapshot's workload of the same kind and name.
func liveTarget(c *Cluster, w *placement.Workload) *planning.Target {
	ref := w.Ref()
	found, _ := planning.Resolve([]pgv1.TargetRef{ref}, c.Inventory(w.Namespace), placement.Constraint{})
	if len(found) == 0 {
		return nil
	}
	return found[0]
}

// placePods places the workload's replicas, without its hard constraints,
// where the engine's simulated rollout puts them.
func placePods(snap *placement.Snapshot, w *placement.Workload) ([]*corev1.Pod, error) {
	spec := w.Template.Spec.DeepCopy()
	for _, c := range planning.HardConstraints(spec) {
		s, err := c.Apply(spec, w.Selector, pgv1.StageNone)
		if err != nil {
			return nil, err
		}
		spec = s
	}
	nodes := map[int]string{}
	if snap.NodeCount() > 0 {
		r, err := snap.SimulateRollout(w.WithSpec(spec))
		if err != nil {
			return nil, err
		}
		i := 0
		for _, s := range r.Steps {
			if s.Node != "" && i < int(w.Replicas) {
				nodes[i] = s.Node
				i++
			}
		}
	}
	pods := make([]*corev1.Pod, w.Replicas)
	for i := range pods {
		name := w.Name + "-" + strconv.Itoa(i)
		labels := targets.PodLabels(w, name, lintRevision)
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: name, Labels: labels, UID: types.UID("lint/" + w.Namespace + "/" + name),
				CreationTimestamp: metav1.NewTime(metav1.Now().Add(-24 * 3600e9))},
			Spec: *spec.DeepCopy(),
		}
		p.Spec.NodeName = nodes[i]
		pods[i] = p
	}
	return pods, nil
}

// workloadOf is the engine's view of a manifest's Deployment or
// StatefulSet, with no pods yet, built as the operator builds it.
func workloadOf(o any, defaultNS string) *placement.Workload {
	w := targets.WorkloadOf(o)
	if w == nil {
		return nil
	}
	copied := *w
	copied.Namespace = namespaceOr(w.Namespace, defaultNS)
	copied.Template = *w.Template.DeepCopy()
	return &copied
}

func namespaceOr(ns, def string) string {
	if ns == "" {
		return def
	}
	return ns
}

// syntheticNodes are n identical nodes, each its own hostname, with room
// for any pod, spread round robin over zones when lint is given some:
// lint with --nodes judges placement, not resources.
func syntheticNodes(n int, zones []string) []*corev1.Node {
	nodes := make([]*corev1.Node, n)
	for i := range nodes {
		name := fmt.Sprintf("node-%d", i+1)
		labels := map[string]string{corev1.LabelHostname: name}
		if len(zones) > 0 {
			labels[corev1.LabelTopologyZone] = zones[i%len(zones)]
		}
		nodes[i] = &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Status: corev1.NodeStatus{
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000"), corev1.ResourceMemory: resource.MustParse("1Ti"), corev1.ResourcePods: resource.MustParse("1000")},
				Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			},
		}
	}
	return nodes
}

// syntheticKeys are the topology keys the synthetic nodes carry: a
// constraint over another key would be judged against a topology lint
// made up, and is judged without nodes instead.
func syntheticKeys(zones []string) map[string]bool {
	keys := map[string]bool{corev1.LabelHostname: true}
	if len(zones) > 0 {
		keys[corev1.LabelTopologyZone] = true
	}
	return keys
}

// Assumptions says what lint assumed of the cluster, for its note.
func (o LintOptions) Assumptions() string {
	switch {
	case o.Cluster != nil:
		return ""
	case o.Nodes == 0:
		return "without --nodes or --snapshot, rollouts and capacity are not judged; only selector overlap and clobbering are"
	}
	what := fmt.Sprintf("assumed %d identical nodes with room for every pod, one %s each", o.Nodes, corev1.LabelHostname)
	if len(o.Zones) > 0 {
		what += fmt.Sprintf(", spread round robin over %s %s", corev1.LabelTopologyZone, strings.Join(o.Zones, ", "))
	} else {
		what += fmt.Sprintf(", and no %s (give --zones to judge zone constraints)", corev1.LabelTopologyZone)
	}
	return what + "; a constraint over any other key is judged without nodes: selector overlap and clobbering only"
}
