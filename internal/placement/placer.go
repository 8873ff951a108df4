package placement

import (
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// placer places the pods of one template, remembering where it put them.
type placer struct {
	e         *evaluator
	antiTerms []affinityTerm
	req       resources
	// own counts the workload's pods per evaluated node, to prefer spreading
	// them as the scheduler's scoring would.
	own []int32
	// requestedCPU and allocatableCPU are each evaluated node's, read once:
	// every placement compares every node's load, and the snapshot's nodes
	// do not change while a placer lives (a simulation's placements are
	// the evaluator's extraReq).
	requestedCPU, allocatableCPU []int64
}

func (s *Snapshot) newPlacer(pod *corev1.Pod, old []podID) (*placer, error) {
	return s.newPlacerWith(pod, old, evalOptions{})
}

func (s *Snapshot) newPlacerWith(pod *corev1.Pod, old []podID, opts evalOptions) (*placer, error) {
	e, err := s.newEvaluatorWith(pod, opts)
	if err != nil {
		return nil, err
	}
	anti, err := requiredAntiAffinityTerms(pod)
	if err != nil {
		return nil, err
	}
	p := &placer{e: e, antiTerms: anti, req: podRequests(pod), own: make([]int32, len(e.order)),
		requestedCPU: make([]int64, len(e.order)), allocatableCPU: make([]int64, len(e.order))}
	for i, n := range e.order {
		ni := s.nodes[n]
		p.requestedCPU[i], p.allocatableCPU[i] = ni.requested.milliCPU, ni.allocatable.milliCPU
	}
	for _, id := range old {
		if i := e.boundPos(s.pods[id]); i >= 0 {
			p.own[i]++
		}
	}
	return p, nil
}

// place finds a node for pod, binds it there in the simulation and returns
// the node's position, or -1 when no node passes the filters.
func (p *placer) place(pod *corev1.Pod) int {
	best := -1
	for _, i := range p.e.candidates {
		// A node that would not beat the best so far is not chosen
		// whether it fits or not: its filters are not run.
		if best >= 0 && !p.better(i, best) {
			continue
		}
		if p.e.fits(i) {
			best = i
		}
	}
	if best >= 0 {
		p.e.simulateBind(pod, p.antiTerms, p.req, best)
		p.own[best]++
	}
	return best
}

// better approximates the scheduler's scoring: fewer of the workload's own
// pods first, then the less requested node.
func (p *placer) better(i, j int) bool {
	if p.own[i] != p.own[j] {
		return p.own[i] < p.own[j]
	}
	return p.load(i) < p.load(j)
}

func (p *placer) load(i int) float64 {
	if p.allocatableCPU[i] == 0 {
		return math.Inf(1)
	}
	return float64(p.requestedCPU[i]+p.e.extraReq[i].milliCPU) / float64(p.allocatableCPU[i])
}

func (p *placer) remove(id podID) {
	if i := p.e.boundPos(p.e.s.pods[id]); i >= 0 {
		p.own[i]--
	}
	p.e.simulateRemove(id)
}

// forget takes pods that are already going away out of the simulation;
// unlike remove, they were never counted among the workload's own.
func (p *placer) forget(ids []podID) {
	for _, id := range ids {
		p.e.simulateRemove(id)
	}
}

func (p *placer) nodeName(i int) string { return p.e.s.nodes[p.e.order[i]].node.Name }

// simulatedUIDPrefix starts the UID of every pod a simulation makes up.
const simulatedUIDPrefix = "simulated/"

// isSimulated reports whether a pod is one a simulation made up, not one
// of the cluster's.
func isSimulated(pod *corev1.Pod) bool {
	return strings.HasPrefix(string(pod.UID), simulatedUIDPrefix)
}

// newPod materialises a pod of the new revision.
func newPod(w *Workload, name string, extraLabels map[string]string) *corev1.Pod {
	lbls := make(map[string]string, len(w.Template.Labels)+len(extraLabels))
	for k, v := range w.Template.Labels {
		lbls[k] = v
	}
	for k, v := range extraLabels {
		lbls[k] = v
	}
	// Simulated pods are only read, so they share the template's spec.
	spec := w.Template.Spec
	spec.NodeName = ""
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: name, Labels: lbls, UID: types.UID(simulatedUIDPrefix + w.Namespace + "/" + name)},
		Spec:       spec,
	}
}
