package placement

import (
	"fmt"
	"slices"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
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

// SurgeAndUnavailable resolves the rolling update's maxSurge (rounded up)
// and maxUnavailable (rounded down) against the replicas, as the Deployment
// controller does, including its rule that both cannot be 0.
func SurgeAndUnavailable(strategy appsv1.DeploymentStrategy, replicas int32) (int, int, error) {
	quarter := intstr.FromString("25%")
	surge, unavailable := &quarter, &quarter
	if ru := strategy.RollingUpdate; ru != nil {
		if ru.MaxSurge != nil {
			surge = ru.MaxSurge
		}
		if ru.MaxUnavailable != nil {
			unavailable = ru.MaxUnavailable
		}
	}
	ms, err := intstr.GetScaledValueFromIntOrPercent(surge, int(replicas), true)
	if err != nil {
		return 0, 0, fmt.Errorf("maxSurge: %w", err)
	}
	mu, err := intstr.GetScaledValueFromIntOrPercent(unavailable, int(replicas), false)
	if err != nil {
		return 0, 0, fmt.Errorf("maxUnavailable: %w", err)
	}
	if ms == 0 && mu == 0 {
		mu = 1
	}
	return ms, mu, nil
}

func (s *Snapshot) simulateDeployment(w *Workload, old, leaving []podID) (Rollout, error) {
	var r Rollout
	for _, id := range old {
		r.Recreates = append(r.Recreates, s.pods[id].name)
	}
	sort.Strings(r.Recreates)
	template := newRevisionPod(w, w.Name+"-new")
	pl, err := s.newPlacer(w, template)
	if err != nil {
		return r, fmt.Errorf("simulate rollout of %s: %w", w.Ref(), err)
	}
	defer pl.release()
	replicas := int(w.Replicas)
	maxSurge, maxUnavailable := 0, replicas
	if w.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		if maxSurge, maxUnavailable, err = SurgeAndUnavailable(w.Strategy, w.Replicas); err != nil {
			return r, fmt.Errorf("simulate rollout of %s: %w", w.Ref(), err)
		}
	}

	// Old pods that are not running count as unavailable already.
	oldAvailable := 0
	for _, id := range old {
		if s.pods[id].node != noNode {
			oldAvailable++
		}
	}
	remainingOld := append([]podID(nil), old...)
	// newOn counts the new revision's pods per node, which the controller
	// ranks old pods by.
	newOn := map[string]int{}
	var buffers scaleDownBuffers
	created, placed := 0, 0
	// Every new pod is the template's: only their names differ, and the
	// simulation places the template itself under each name.
	namePrefix := w.Name + "-" + newRevisionHash + "-"
	var pending []string
	for !s.interrupted() {
		progress := false
		// Pending new pods are retried first: the scheduler retries them
		// whenever something in the cluster changes.
		for len(pending) > 0 {
			if i := pl.place(template); i >= 0 {
				r.Steps = append(r.Steps, pl.step(StepSchedule, pending[0], i))
				newOn[pl.nodeName(i)]++
				pending = pending[1:]
				placed++
				progress = true
				continue
			}
			break
		}
		// Scale up the new revision within replicas + maxSurge.
		for created < replicas && created+len(remainingOld) < replicas+maxSurge && !s.interrupted() {
			name := namePrefix + strconv.Itoa(created)
			created++
			progress = true
			if len(pending) == 0 {
				if i := pl.place(template); i >= 0 {
					r.Steps = append(r.Steps, pl.step(StepCreate, name, i))
					newOn[pl.nodeName(i)]++
					placed++
					continue
				}
			}
			r.Steps = append(r.Steps, Step{Action: StepCreate, Pod: name})
			pending = append(pending, name)
		}
		// The first wave was placed beside the pods being deleted; they
		// are gone before the next.
		pl.forget(leaving)
		leaving = nil
		// Scale down the old revision as far as availability allows: the
		// controller works out how many, then deletes that many in its
		// order of preference.
		victims := s.scaleDownVictims(remainingOld, newOn, len(pending), oldAvailable+placed-(replicas-maxUnavailable), &buffers)
		for _, id := range victims {
			if s.pods[id].node != noNode {
				oldAvailable--
			}
			pl.remove(id)
			r.Steps = append(r.Steps, Step{Action: StepDelete, Pod: s.pods[id].name})
			progress = true
		}
		remainingOld = withoutPods(remainingOld, victims)
		if created == replicas && len(pending) == 0 && len(remainingOld) == 0 {
			r.Completes = true
			return r, nil
		}
		if !progress {
			break
		}
	}
	if len(pending) > 0 {
		v := pl.e.verdict()
		r.Blocked, r.BlockedPod = &v, pending[0]
	}
	return r, nil
}
