package placement

import (
	"fmt"
	"slices"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// newRevisionHash stands for the pod-template-hash of the revision being
// rolled out: unknown until the ReplicaSet exists, but different from every
// existing revision's, which is all that matchLabelKeys needs.
const newRevisionHash = "placement-guard-next"

// The actions of a rollout's steps.
const (
	// StepCreate is a new pod, placed at once or left Pending.
	StepCreate = "create"
	// StepSchedule is a Pending pod placed later.
	StepSchedule = "schedule"
	// StepDelete is an old pod removed.
	StepDelete = "delete"
)

// Step is one action of a simulated rollout.
type Step struct {
	// Action is StepCreate, StepSchedule or StepDelete.
	Action string
	Pod    string
	// Node is where a created pod was placed; empty when it stays Pending.
	Node string
	// Tied are the other nodes of the best score when Node was chosen:
	// the scheduler picks any of them, so each is as likely as Node.
	// Empty when the snapshot omits them (OmitTies).
	Tied []string
	// Sampled says the scheduler scores only some of the feasible nodes
	// there (percentageOfNodesToScore), so Node is one of its possible
	// choices, not the choice.
	Sampled bool
}

// Rollout is the outcome of a simulated rollout.
type Rollout struct {
	// Completes is true when every replica of the new template was placed
	// and every old pod removed.
	Completes bool
	Steps     []Step
	// Blocked is the verdict of the pod that could not be placed when the
	// rollout stopped making progress.
	Blocked *Verdict
	// BlockedPod is that pod's name.
	BlockedPod string
	// Recreates are the existing pods the rollout deletes and replaces.
	Recreates []string
	// Note explains a rollout that does not recreate pods (OnDelete) or
	// other particulars a person should know.
	Note string
	// Slots is, for a workload of more replicas than the cluster's nodes
	// admit together, that bound: the rollout was not simulated.
	Slots int64
}

// LeftPending are the pods the rollout leaves Pending at its end, sorted:
// those created without a node and not scheduled later.
func (r Rollout) LeftPending() []string {
	left := map[string]bool{}
	for _, st := range r.Steps {
		if st.Action == StepCreate || st.Action == StepSchedule {
			left[st.Pod] = st.Node == ""
		}
	}
	var out []string
	for pod, pending := range left {
		if pending {
			out = append(out, pod)
		}
	}
	sort.Strings(out)
	return out
}

// SimulateRollout plays the controller's rollout of w.Template against the
// snapshot: new pods are placed one by one where the scheduler's filters
// allow, old pods are removed as the strategy allows. The snapshot is not
// changed.
//
// The workload's pods already being deleted (the end of its last rollout, a
// scale-down) hold their nodes until they go, and the scheduler counts them
// until then. A Deployment's first new pods are created at once, and
// placed as the scheduler places them then, beside those pods (or left
// Pending where none fits); the controller waits for its new pods to run
// before it goes on, by which time they are gone, and every later pod is
// placed without them. They delay a rollout, they do not stop it.
func (s *Snapshot) SimulateRollout(w *Workload) (Rollout, error) {
	if r, over := s.overSlots(w); over {
		return r, nil
	}
	old := s.workloadPods(w.Pods)
	leaving, err := s.leavingPods(w)
	if err != nil {
		return Rollout{}, fmt.Errorf("simulate rollout of %s: %w", w.Ref(), err)
	}
	return rolloutsOf(w.Kind).simulate(s, w, old, leaving)
}

// leavingPods returns the workload's pods that are being deleted: those of
// its pods and those its selector selects (an old ReplicaSet's, whose live
// pods are all gone). The live path hands the engine only live pods.
func (s *Snapshot) leavingPods(w *Workload) ([]podID, error) {
	var ids []podID
	for _, uid := range w.Pods {
		if id, ok := s.podByUID[uid]; ok && s.pods[id].terminating() {
			ids = append(ids, id)
		}
	}
	if w.Selector == nil {
		return ids, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(w.Selector)
	if err != nil {
		return nil, fmt.Errorf("selector: %w", err)
	}
	if sel.Empty() {
		// Selects every pod of the namespace: not a workload's own.
		return ids, nil
	}
	ids = append(ids, s.terminatingSelected(w.Namespace, sel)...)
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// workloadPods returns the snapshot's pods among uids, newest first: the
// order in which the ReplicaSet controller prefers to delete ready pods.
func (s *Snapshot) workloadPods(uids []types.UID) []podID {
	ids := make([]podID, 0, len(uids))
	for _, uid := range uids {
		if id, ok := s.podByUID[uid]; ok && s.pods[id].deleted == nil {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool {
		a, b := s.pods[ids[i]], s.pods[ids[j]]
		// Unscheduled pods go first, as the controller deletes them first.
		if (a.nodeName == "") != (b.nodeName == "") {
			return a.nodeName == ""
		}
		if !a.created.Equal(&b.created) {
			return b.created.Before(&a.created)
		}
		return a.name > b.name
	})
	return ids
}
