package placement

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// journal changes the snapshot for a simulation and undoes every change,
// last first.
type journal struct {
	s     *Snapshot
	steps []func()
	// added are the UIDs of the pods the simulation added, and gone those
	// of the pods it removed.
	added, gone []types.UID
}

// undo restores the snapshot.
func (j *journal) undo() {
	for i := len(j.steps) - 1; i >= 0; i-- {
		j.steps[i]()
	}
	j.steps = nil
}

// workloadUIDs are w's pods as the simulation left them: those not removed
// and the replacements it added.
func (j *journal) workloadUIDs(w *Workload) []types.UID {
	out := make([]types.UID, 0, len(w.Pods)+len(j.added))
	for _, uid := range w.Pods {
		if !slices.Contains(j.gone, uid) {
			out = append(out, uid)
		}
	}
	return append(out, j.added...)
}

func (j *journal) addNode(n *corev1.Node) {
	j.s.UpsertNode(n)
	j.steps = append(j.steps, func() { j.s.DeleteNode(n.Name) })
}

// replaceNode puts n in place of the node of the same name.
func (j *journal) replaceNode(n *corev1.Node) {
	was := j.s.nodes[j.s.nodeByName[n.Name]].node
	j.s.UpsertNode(n)
	j.steps = append(j.steps, func() { j.s.UpsertNode(was) })
}

// removeNode takes a node out with every pod bound to it.
func (j *journal) removeNode(n *corev1.Node) {
	nid := j.s.nodeByName[n.Name]
	for id := range j.s.nodes[nid].pods {
		j.removePod(id)
	}
	was := j.s.nodes[nid].node
	j.s.DeleteNode(n.Name)
	j.steps = append(j.steps, func() { j.s.UpsertNode(was) })
}

func (j *journal) removePod(id podID) {
	pi := j.s.pods[id]
	j.s.DeletePod(pi.uid)
	j.gone = append(j.gone, pi.uid)
	j.steps = append(j.steps, func() { j.s.upsertRecord(pi) })
}

func (j *journal) addPod(pod *corev1.Pod) error {
	if err := j.s.UpsertPod(pod); err != nil {
		return err
	}
	j.added = append(j.added, pod.UID)
	j.steps = append(j.steps, func() { j.s.DeletePod(pod.UID) })
	return nil
}
