package placement

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// A node asked for one placeholder is the smallest the autoscaler has for
// one pod. The stages that follow may need more of it: the soft stage
// moves the pods onto the new node, and the hard stage's rolling update
// then surges a new pod beside the one it replaces there. A node that
// holds one pod leaves that surge pod Pending and the migration asks
// again, for a node its maxNodes may not allow. The request is sized by
// simulating the stages still to come on nodes that hold exactly what
// the placeholder asks for, the least an autoscaler launches for it.

// maxPodsPerRequestedNode bounds how many of a target's pods a requested
// node is sized for: the pod, its surge, and one more.
const maxPodsPerRequestedNode = 3

// podsPerRequestedNode is how many of the first workload's pods each node
// asked for must hold so that the stages still to come complete on the
// shortfall of such nodes: 1 when one does, or when nothing can tell (no
// qualifying node to model the new ones on, several workloads). fits is
// false when none up to maxPodsPerRequestedNode lets them complete.
func (s *Snapshot) podsPerRequestedNode(workloads []*Workload, c Constraint, spec CapacitySpec, final pgv1.Stage, capacity Capacity, requests corev1.ResourceList, shortfall int) (pods int, fits bool, err error) {
	if len(capacity.Nodes) == 0 || len(workloads) != 1 || shortfall <= 0 {
		return 1, true, nil
	}
	model := s.nodes[s.nodeByName[capacity.Nodes[0]]].node
	for k := 1; k <= maxPodsPerRequestedNode; k++ {
		ok, err := s.stagesCompleteOn(workloads[0], c, spec, final, func(i int) *corev1.Node {
			return sizedNode(model, fmt.Sprintf("%s/requested-%d", model.Name, i), c.TopologyKey(), requests, int64(k))
		}, shortfall)
		if err != nil || ok {
			return k, ok, err
		}
	}
	return 1, false, nil
}

// stagesCompleteOn reports whether the stages still to come complete with
// n more nodes made by node: the soft stage first when the workload does
// not carry it yet and the final stage is hard, then the final stage from
// where the soft stage's rollout leaves the pods. The snapshot is restored.
func (s *Snapshot) stagesCompleteOn(w *Workload, c Constraint, spec CapacitySpec, final pgv1.Stage, node func(int) *corev1.Node, n int) (bool, error) {
	j := &journal{s: s}
	defer j.undo()
	for i := range n {
		j.addNode(node(i + 1))
	}
	finalCompletes := func(w *Workload) (bool, error) {
		a, err := s.Analyze(Question{Workloads: []*Workload{w}, Constraint: c, Stage: final, Capacity: spec})
		return err == nil && a.FirstBlocking() == nil, err
	}
	rendered := c.RenderFor(w, []*Workload{w})
	soft, err := rendered.Apply(&w.Template.Spec, w.Selector, pgv1.StageSoft)
	if err != nil {
		return false, fmt.Errorf("apply the soft stage to %s: %w", w.Ref(), err)
	}
	if final != pgv1.StageHard || equality.Semantic.DeepEqual(soft, &w.Template.Spec) {
		return finalCompletes(w)
	}
	softened := w.WithSpec(soft)
	r, err := s.SimulateRollout(softened)
	if err != nil || !r.Completes {
		return false, err
	}
	var ok bool
	err = s.WithRolledOut(softened, r, func(rolled *Workload, _ []*corev1.Pod) error {
		ok, err = finalCompletes(rolled)
		return err
	})
	return ok, err
}

// sizedNode is a node like model in a domain of its own (name) whose
// allocatable resources hold k pods of requests, and nothing more.
func sizedNode(model *corev1.Node, name, key string, requests corev1.ResourceList, k int64) *corev1.Node {
	n := surgeNode(model)
	n.Name = name
	n.Labels[corev1.LabelHostname] = name
	if key != "" {
		n.Labels[key] = name
	}
	alloc := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(110, resource.DecimalSI)}
	for r, q := range requests {
		scaled := q.DeepCopy()
		scaled.Mul(k)
		alloc[r] = scaled
	}
	n.Status.Allocatable, n.Status.Capacity = alloc, alloc
	return n
}

// scaledRequests are requests k times over.
func scaledRequests(requests corev1.ResourceList, k int64) corev1.ResourceList {
	out := corev1.ResourceList{}
	for r, q := range requests {
		scaled := q.DeepCopy()
		scaled.Mul(k)
		out[r] = scaled
	}
	return out
}
