package placement

import (
	"fmt"
	"strconv"
)

// Unplaceable is how many of a workload's replicas cannot be placed when
// its pods are placed one by one on the cluster as it is, beside every
// pod but its own, as the scheduler places a fresh scale-up of the
// template: what "no worse" compares before and after a change to an
// already unsatisfiable workload, so that a change that moves it where
// fewer of its pods fit is told from one that leaves it as it was. It
// places at most as many pods as the cluster's nodes admit, and stops
// when its context ends (Within).
func (s *Snapshot) Unplaceable(w *Workload) (int, error) {
	replicas := int64(max(w.Replicas, 0))
	if replicas == 0 {
		return 0, nil
	}
	template := newPod(w, w.Name+"-placed", nil)
	pl, err := s.newPlacer(w, template)
	if err != nil {
		return 0, fmt.Errorf("place the replicas of %s: %w", w.Ref(), err)
	}
	defer pl.release()
	pl.forget(s.workloadPods(w.Pods))
	placeable := min(replicas, s.PodSlots())
	var placed int64
	for ; placed < placeable && !s.interrupted(); placed++ {
		if pl.place(newPod(w, w.Name+"-placed-"+strconv.FormatInt(placed, 10), nil)) < 0 {
			break
		}
	}
	return int(replicas - placed), nil
}
