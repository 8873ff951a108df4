package placement

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// The snapshot's pods as the operator's controller reads them: rebuilt
// from the engine's records, found through its indexes.

// Pod returns the pod with the uid as TrimPod would keep it, if the
// snapshot has it. The pod is rebuilt from the engine's record for the
// caller; its shared parts (labels, owners, spec) must not be changed.
func (s *Snapshot) Pod(uid types.UID) (*corev1.Pod, bool) {
	id, ok := s.podByUID[uid]
	if !ok {
		return nil, false
	}
	return s.pods[id].materialize(), true
}

// PodLabels returns the labels of the pod with the uid, if the snapshot
// has it; they are shared and must not be changed.
func (s *Snapshot) PodLabels(uid types.UID) (map[string]string, bool) {
	id, ok := s.podByUID[uid]
	if !ok {
		return nil, false
	}
	return s.pods[id].labels(), true
}

// PodUIDs returns the UIDs of every pod of the snapshot.
func (s *Snapshot) PodUIDs() []types.UID {
	out := make([]types.UID, 0, len(s.podByUID))
	for uid := range s.podByUID {
		out = append(out, uid)
	}
	return out
}

// PodsControlledBy returns the pods whose controller has the uid, in the
// namespace, not being deleted, as Pod returns them, by name.
func (s *Snapshot) PodsControlledBy(namespace string, uid types.UID) []*corev1.Pod {
	var out []*corev1.Pod
	for id := range s.byController[uid] {
		if pi := s.pods[id]; pi.namespace() == namespace && !pi.terminating() {
			out = append(out, pi.materialize())
		}
	}
	sortByName(out)
	return out
}

// PodsSelected returns the pods of the namespace the selector selects, not
// being deleted, as Pod returns them, by name.
func (s *Snapshot) PodsSelected(namespace string, sel labels.Selector) []*corev1.Pod {
	var out []*corev1.Pod
	for id := range s.labels.candidates(namespace, sel) {
		if pi := s.pods[id]; !pi.terminating() && sel.Matches(labels.Set(pi.labels())) {
			out = append(out, pi.materialize())
		}
	}
	sortByName(out)
	return out
}

// TerminatingSelected counts the pods of the namespace the selector
// selects that are being deleted: the scheduler counts them where they run
// until they are gone.
func (s *Snapshot) TerminatingSelected(namespace string, sel labels.Selector) int {
	return len(s.terminatingSelected(namespace, sel))
}

// terminatingSelected are the pods of the namespace the selector selects
// that are being deleted, in no order.
func (s *Snapshot) terminatingSelected(namespace string, sel labels.Selector) []podID {
	var ids []podID
	for id := range s.labels.candidates(namespace, sel) {
		if pi := s.pods[id]; pi.terminating() && sel.Matches(labels.Set(pi.labels())) {
			ids = append(ids, id)
		}
	}
	return ids
}

func sortByName(pods []*corev1.Pod) {
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
}

// controllerOf is the UID of the pod's controller, "" without one.
func controllerOf(p *corev1.Pod) types.UID {
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
		return ref.UID
	}
	return ""
}
