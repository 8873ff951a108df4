package placement

import (
	"fmt"
)

// The disruptions a placed workload meets after its migration: a node
// drained (an upgrade, a consolidation) and a scale-out (an autoscaler at
// its maximum). Each is simulated on the snapshot as it is, which is not
// changed.

// Drain is the engine's answer to a drain of one node.
type Drain struct {
	Node string
	// Evicted are the workload's pods on the node.
	Evicted int
	// Unplaced names the evicted pods no other node admits, one after the
	// other, with the node cordoned.
	Unplaced []string
	// Message is the scheduler's message for the first unplaced pod.
	Message string
}

// SimulateDrain evicts the workload's pods from node in turn, with the node
// cordoned as kubectl drain leaves it, and places a pod of the workload's
// template for each where the scheduler's filters allow.
func (s *Snapshot) SimulateDrain(w *Workload, node string) (Drain, error) {
	d := Drain{Node: node}
	nid, ok := s.nodeByName[node]
	if !ok {
		return d, nil
	}
	own := s.workloadPods(w.Pods)
	p, err := s.newPlacer(newPod(w, w.Name+"-evicted", nil), own)
	if err != nil {
		return d, fmt.Errorf("simulate a drain of %s for %s: %w", node, w.ref(), err)
	}
	if i := p.e.posOf[nid]; i >= 0 {
		p.e.nodeReason[i] = ReasonUnschedulable
		p.e.resetCandidates()
	}
	for k, id := range own {
		if s.pods[id].node != nid {
			continue
		}
		d.Evicted++
		p.remove(id)
		if p.place(newPod(w, fmt.Sprintf("%s-evicted-%d", w.Name, k), nil)) < 0 {
			d.Unplaced = append(d.Unplaced, s.pods[id].pod.Name)
			if d.Message == "" {
				d.Message = p.e.verdict().Message
			}
		}
	}
	return d, nil
}

// ScaleOut is the engine's answer to a scale-out of the workload.
type ScaleOut struct {
	Replicas int32
	// Placed counts the replicas that find a node: those running and the
	// added ones placed one by one.
	Placed int32
	// Message is the scheduler's message for the first added pod that
	// finds none.
	Message string
}

// SimulateScaleTo adds pods of the workload's template one by one until it
// has replicas, each where the scheduler's filters allow.
func (s *Snapshot) SimulateScaleTo(w *Workload, replicas int32) (ScaleOut, error) {
	own := s.workloadPods(w.Pods)
	out := ScaleOut{Replicas: replicas}
	for _, id := range own {
		if s.pods[id].node != noNode {
			out.Placed++
		}
	}
	if out.Placed >= replicas {
		return out, nil
	}
	p, err := s.newPlacer(newPod(w, w.Name+"-scaled", nil), own)
	if err != nil {
		return out, fmt.Errorf("simulate scaling %s to %d: %w", w.ref(), replicas, err)
	}
	for k := out.Placed; k < replicas; k++ {
		if p.place(newPod(w, fmt.Sprintf("%s-scaled-%d", w.Name, k), nil)) < 0 {
			out.Message = p.e.verdict().Message
			break
		}
		out.Placed++
	}
	return out, nil
}
