package placement

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// WithRolledOut runs f on the cluster as the completed rollout r of w
// leaves it: the pods r deletes are gone and the pods it places run where
// it placed them, with w's template. f gets the workload as it then is and
// its pods; the disruptions a stage not yet applied would meet are
// simulated on it, since the placement they need does not exist yet. The
// snapshot is restored before WithRolledOut returns, whatever f does.
func (s *Snapshot) WithRolledOut(w *Workload, r Rollout, f func(rolled *Workload, pods []*corev1.Pod) error) error {
	if !r.Completes {
		return fmt.Errorf("%s: the rollout does not complete, so it leaves no placement to simulate on", w.Ref())
	}
	final, removed, err := s.endOf(w, r)
	if err != nil {
		return err
	}
	j := &journal{s: s}
	defer j.undo()
	for _, uid := range removed {
		if id, ok := s.podByUID[uid]; ok {
			j.removePod(id)
		}
	}
	for _, pod := range final {
		if err := j.addPod(pod); err != nil {
			return fmt.Errorf("%s: place the rolled-out pod %s: %w", w.Ref(), pod.Name, err)
		}
	}
	rolled := *w
	rolled.Pods = j.workloadUIDs(w)
	pods := make([]*corev1.Pod, 0, len(rolled.Pods))
	for _, uid := range rolled.Pods {
		if pod, ok := s.Pod(uid); ok {
			pods = append(pods, pod)
		}
	}
	if label, value := rolloutsOf(rolled.Kind).newRevision(); label != "" {
		rolled.RevisionLabel, rolled.Revision = label, value
	}
	return f(&rolled, pods)
}

// endOf replays r's steps: the pods its placements leave running, bound to
// their nodes, and the existing pods it deletes.
func (s *Snapshot) endOf(w *Workload, r Rollout) ([]*corev1.Pod, []types.UID, error) {
	byName := map[string]types.UID{}
	for _, id := range s.workloadPods(w.Pods) {
		byName[s.pods[id].name] = s.pods[id].uid
	}
	var removed []types.UID
	nodeOf := map[string]string{}
	var order []string
	for _, step := range r.Steps {
		switch step.Action {
		case StepDelete:
			if uid, ok := byName[step.Pod]; ok {
				removed = append(removed, uid)
			}
		case StepCreate, StepSchedule:
			if step.Node == "" {
				continue
			}
			if _, seen := nodeOf[step.Pod]; !seen {
				order = append(order, step.Pod)
			}
			nodeOf[step.Pod] = step.Node
		}
	}
	final := make([]*corev1.Pod, 0, len(order))
	for _, name := range order {
		pod, err := s.rolledPod(w, name)
		if err != nil {
			return nil, nil, err
		}
		pod.UID = types.UID(simulatedUIDPrefix + "rolled/" + w.Namespace + "/" + name)
		pod.Spec.NodeName = nodeOf[name]
		pod.Status.Phase = corev1.PodRunning
		final = append(final, pod)
	}
	return final, removed, nil
}

// rolledPod is the pod of the new revision named name, as the rollout
// simulation made it.
func (s *Snapshot) rolledPod(w *Workload, name string) (*corev1.Pod, error) {
	return rolloutsOf(w.Kind).rolledPod(s, w, name)
}
