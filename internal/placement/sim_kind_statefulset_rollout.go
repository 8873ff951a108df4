package placement

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func (s *Snapshot) simulateStatefulSet(w *Workload, old, leaving []podID) (Rollout, error) {
	var r Rollout
	if w.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		r.Completes = true
		r.Note = fmt.Sprintf("%s uses the OnDelete update strategy: no pod is recreated now, and the constraint takes effect on each pod only when that pod is next deleted", w.Ref())
		return r, nil
	}
	partition, maxUnavailable := 0, 1
	if ru := w.UpdateStrategy.RollingUpdate; ru != nil {
		if ru.Partition != nil {
			partition = int(*ru.Partition)
		}
		if ru.MaxUnavailable != nil {
			n, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, int(w.Replicas), false)
			if err != nil {
				return r, fmt.Errorf("simulate rollout of %s: maxUnavailable: %w", w.Ref(), err)
			}
			maxUnavailable = max(n, 1)
		}
	}
	if w.Replicas <= 0 {
		r.Completes = true
		return r, nil
	}
	sim := &statefulSetRollout{s: s, w: w, r: &r, parallel: w.PodManagementPolicy == appsv1.ParallelPodManagement,
		states: make([]ordinalState, w.Replicas), old: map[int]podID{}, verdicts: map[int]Verdict{}}
	for ord := range min(partition, int(w.Replicas)) {
		// Below the partition the controller keeps, or recreates, the old
		// revision: nothing the rollout changes.
		sim.states[ord] = ordinalOld
	}
	for _, id := range old {
		if ord, ok := ordinalOf(w.Name, s.pods[id].name); ok && ord < int(w.Replicas) {
			sim.old[ord] = id
			sim.states[ord] = ordinalOld
			if !runningAndReady(s.pods[id]) {
				sim.states[ord] = ordinalOldUnavailable
			}
		}
	}
	var err error
	if sim.pl, err = s.newPlacer(w, statefulSetPod(s, w, int(w.Replicas)-1)); err != nil {
		return r, fmt.Errorf("simulate rollout of %s: %w", w.Ref(), err)
	}
	defer sim.pl.release()
	sim.pl.forget(leaving)
	sim.run(partition, maxUnavailable)
	sort.Strings(r.Recreates)
	r.Completes = true
	for ord := partition; ord < int(w.Replicas); ord++ {
		r.Completes = r.Completes && sim.states[ord] == ordinalPlaced
	}
	// The rollout stops at the lowest pod left Pending.
	for ord, st := range sim.states {
		if st == ordinalPending {
			v := sim.verdicts[ord]
			r.Blocked, r.BlockedPod = &v, w.Name+"-"+strconv.Itoa(ord)
			break
		}
	}
	return r, nil
}

// ordinalState is where one ordinal of a StatefulSet stands in a simulated
// rollout.
type ordinalState int

const (
	ordinalAbsent         ordinalState = iota // deleted, or never created
	ordinalOld                                // the old revision, running
	ordinalPlaced                             // the new revision, placed (Ready at once)
	ordinalPending                            // the new revision, unschedulable
	ordinalOldUnavailable                     // the old revision, not Running and Ready
)

// statefulSetRollout plays the StatefulSet controller's sync loop: first
// it creates the missing pods in ordinal order (OrderedReady stops at the
// first pod that is not Ready, and then touches nothing else; Parallel
// creates them all), then, while fewer than maxUnavailable pods are
// unavailable, it deletes old pods from the highest ordinal down to the
// partition, as many as the budget allows (MaxUnavailableStatefulSet, on
// by default since 1.37; one at a time without it).
type statefulSetRollout struct {
	s        *Snapshot
	w        *Workload
	r        *Rollout
	parallel bool
	states   []ordinalState
	old      map[int]podID
	pl       *placer
	// verdicts are the scheduler's last word on each Pending pod.
	verdicts map[int]Verdict
}

func (sim *statefulSetRollout) run(partition, maxUnavailable int) {
	for range 2*len(sim.states) + 2 {
		if sim.s.interrupted() {
			return
		}
		created, blocked := sim.create()
		if blocked {
			// OrderedReady waits for a pod that never becomes Ready.
			return
		}
		if !sim.condemn(partition, maxUnavailable) && !created {
			return
		}
	}
}

// create makes the missing pods and places them; blocked reports an
// OrderedReady StatefulSet waiting on a pod that is not Ready. Pods left
// Pending are tried again first: the scheduler retries them as soon as a
// deletion frees room, before the controller has made the pods that
// replace the deleted ones.
func (sim *statefulSetRollout) create() (created, blocked bool) {
	for ord, st := range sim.states {
		if st != ordinalPending || sim.s.interrupted() {
			continue
		}
		pod := statefulSetPod(sim.s, sim.w, ord)
		sim.pl.e.useVolumesOf(pod)
		i := sim.pl.place(pod)
		if i < 0 {
			sim.verdicts[ord] = sim.pl.e.verdict()
			continue
		}
		sim.states[ord] = ordinalPlaced
		created = true
		sim.r.Steps = append(sim.r.Steps, sim.pl.step(StepSchedule, pod.Name, i))
	}
	for ord, st := range sim.states {
		if sim.s.interrupted() {
			return created, true
		}
		switch st {
		case ordinalPending:
			if !sim.parallel {
				return created, true
			}
		case ordinalOldUnavailable:
			if !sim.parallel {
				sim.r.Note = fmt.Sprintf("%s is OrderedReady and its pod %s-%d is not Running and Ready: the StatefulSet controller changes nothing until it is", sim.w.Ref(), sim.w.Name, ord)
				return created, true
			}
		case ordinalAbsent:
			created = true
			name := sim.w.Name + "-" + strconv.Itoa(ord)
			pod := statefulSetPod(sim.s, sim.w, ord)
			sim.pl.e.useVolumesOf(pod)
			i := sim.pl.place(pod)
			if i < 0 {
				sim.states[ord] = ordinalPending
				sim.r.Steps = append(sim.r.Steps, Step{Action: StepCreate, Pod: name})
				sim.verdicts[ord] = sim.pl.e.verdict()
				if !sim.parallel {
					return created, true
				}
				continue
			}
			sim.states[ord] = ordinalPlaced
			sim.r.Steps = append(sim.r.Steps, sim.pl.step(StepCreate, name, i))
		}
	}
	return created, false
}

// condemn deletes old pods, highest ordinal first, within the budget the
// unavailable pods leave; it reports whether it deleted any.
//
// A Parallel StatefulSet first deletes the old pods that are unavailable
// already, whatever the budget, so that it does not spend the budget on
// healthy pods while unhealthy ones wait (an OrderedReady one never gets
// here while a pod is not Ready).
func (sim *statefulSetRollout) condemn(partition, maxUnavailable int) bool {
	budget := maxUnavailable
	for _, st := range sim.states {
		if st == ordinalPending || st == ordinalOldUnavailable {
			budget--
		}
	}
	deleted := false
	for ord := len(sim.states) - 1; ord >= partition; ord-- {
		if sim.states[ord] == ordinalOldUnavailable {
			sim.delete(ord)
			deleted = true
		}
	}
	for ord := len(sim.states) - 1; ord >= partition && budget > 0; ord-- {
		if sim.states[ord] != ordinalOld {
			continue
		}
		sim.delete(ord)
		budget--
		deleted = true
	}
	return deleted
}

// delete removes the old pod of an ordinal.
func (sim *statefulSetRollout) delete(ord int) {
	name := sim.w.Name + "-" + strconv.Itoa(ord)
	if id, ok := sim.old[ord]; ok {
		sim.pl.remove(id)
	}
	sim.states[ord] = ordinalAbsent
	sim.r.Recreates = append(sim.r.Recreates, name)
	sim.r.Steps = append(sim.r.Steps, Step{Action: StepDelete, Pod: name})
}

// runningAndReady is whether a pod counts as available to the workload
// controllers (minReadySeconds aside): bound, and its status does not say
// otherwise. A pod without a status (a manifest, a hand-written snapshot)
// is taken as running.
func runningAndReady(pi *podInfo) bool {
	if pi.node == noNode {
		return false
	}
	if phase := pi.phase; phase != "" && phase != corev1.PodRunning {
		return false
	}
	if status, _, ok := pi.ready(); ok {
		return status == corev1.ConditionTrue
	}
	return true
}

// ordinalOf is the ordinal of a StatefulSet's pod from its name.
func ordinalOf(set, pod string) (int, bool) {
	suffix, ok := strings.CutPrefix(pod, set+"-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(suffix)
	return n, err == nil && n >= 0
}

// useVolumesOf recomputes the volume filters for a pod that differs from the
// evaluated one only in its claims, as the pods of a StatefulSet do.
func (e *evaluator) useVolumesOf(pod *corev1.Pod) {
	vols, pre := e.s.volumePreFilter(pod)
	if !e.profile.filters(FilterVolumeBinding) {
		pre = ""
	}
	e.volumes, e.preFilterMsg = vols, pre
	if !e.volumeShared {
		clear(e.volumeReason)
		clear(e.volumeAlso)
	}
	if pre == "" {
		for i, id := range e.order {
			reason, also := volumeFilter(e.profile, vols, e.s.nodes[id].node)
			e.setVolumeReasons(i, reason, also)
		}
	}
	e.resetCandidates()
}

// statefulSetPod is the StatefulSet's pod of ordinal ord at the new
// revision, with the claims that already exist (a claim yet to be created
// follows the pod and cannot pin it).
func statefulSetPod(s *Snapshot, w *Workload, ord int) *corev1.Pod {
	name := w.Name + "-" + strconv.Itoa(ord)
	pod := newPod(w, name, map[string]string{
		appsv1.StatefulSetPodNameLabel: name,
		appsv1.PodIndexLabel:           strconv.Itoa(ord),
	})
	for _, ct := range w.VolumeClaimTemplates {
		claimName := ct.Name + "-" + name
		if _, ok := s.claims[types.NamespacedName{Namespace: w.Namespace, Name: claimName}]; !ok {
			continue
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: ct.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName},
		}})
	}
	return pod
}
