package placement

import (
	"fmt"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// A Deployment's rollout, as its controller and the scheduler play it:
// the new ReplicaSet scaled up within replicas+maxSurge, the old one
// scaled down as far as maxUnavailable allows, each new pod placed as the
// scheduler places it.

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

// simulateDeployment plays a Deployment's rollout of w's template, old
// being its pods and leaving those already being deleted.
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
	// A step for each pod created and each deleted: room for them all
	// saves the growths.
	if n := replicas + len(old); n > 0 {
		r.Steps = make([]Step, 0, n)
	}
	// newOn counts the new revision's pods per node, which the controller
	// ranks old pods by.
	newOn := make(map[nodeID]int, replicas)
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
				newOn[pl.nodeID(i)]++
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
					newOn[pl.nodeID(i)]++
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
