package placement

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// NodeUpgrade is the engine's answer to a surge upgrade of a node pool: each
// node replaced in turn, a new one like it joining before the old one is
// drained and removed.
type NodeUpgrade struct {
	// Replaced lists the nodes replaced, in order.
	Replaced []string
	// Moved counts the workload's pods evicted and placed again.
	Moved int
	// Unplaced names the pods whose replacement no node admitted, and
	// StuckAt the node whose drain evicted the first of them: the upgrade
	// stops there, as a drain waits for a pod that cannot go.
	Unplaced []string
	StuckAt  string
	// Message is the scheduler's message for the first unplaced pod.
	Message string
}

// SimulateNodeUpgrade replaces nodes one after the other, as a managed node
// group or a cluster upgrade does with a surge of one: a node like the old
// one (its labels, capacity and taints) joins, the old one is drained (the
// workload's pods evicted one by one and placed again where the scheduler's
// filters allow, on any node, replaced or not) and leaves the cluster with
// every other pod it ran. Unlike one drain, the replacements accumulate:
// where the first node's pods went decides what the second node's find.
// The snapshot is restored before it returns.
func (s *Snapshot) SimulateNodeUpgrade(w *Workload, nodes []string) (NodeUpgrade, error) {
	var up NodeUpgrade
	j := &journal{s: s}
	defer j.undo()
	live := s.workloadPods(w.Pods)
	for _, name := range nodes {
		nid, ok := s.nodeByName[name]
		if !ok {
			continue
		}
		old := s.nodes[nid].node
		j.addNode(surgeNode(old))
		j.replaceNode(asCordoned(old))
		for _, id := range live {
			if s.pods[id] == nil || s.pods[id].node != nid {
				continue
			}
			name := s.pods[id].name
			j.removePod(id)
			placed, msg, err := s.placeReplacement(w, j, name)
			if err != nil {
				return up, fmt.Errorf("simulate a node upgrade for %s: %w", w.Ref(), err)
			}
			if !placed {
				up.Unplaced, up.StuckAt = append(up.Unplaced, name), old.Name
				if up.Message == "" {
					up.Message = msg
				}
				continue
			}
			up.Moved++
		}
		up.Replaced = append(up.Replaced, old.Name)
		if len(up.Unplaced) > 0 {
			return up, nil
		}
		j.removeNode(old)
		live = s.workloadPods(j.workloadUIDs(w))
	}
	return up, nil
}

// placeReplacement places a pod of the workload's template for the evicted
// pod named name and adds it to the snapshot where it went.
func (s *Snapshot) placeReplacement(w *Workload, j *journal, name string) (bool, string, error) {
	pod := newPod(w, name+"-moved", nil)
	p, err := s.newPlacer(w, pod)
	if err != nil {
		return false, "", err
	}
	i := p.place(pod)
	if i < 0 {
		return false, p.e.verdict().Message, nil
	}
	pod.Spec.NodeName = p.nodeName(i)
	pod.Status.Phase = corev1.PodRunning
	return true, "", j.addPod(pod)
}
