package placement

import (
	"fmt"
	"strconv"
)

// A simulation places a workload's pods one by one, so its work grows
// with the replicas the workload asks for: a number anyone who may write
// a Deployment chooses, twenty million as easily as three. No more of a
// workload's pods can run at once than the cluster's nodes admit (each
// node's allocatable pods, whatever else they hold), so a rollout of more
// replicas than that cannot complete, and saying so takes one sweep of
// the nodes: the simulation is not run. Below that bound the work grows
// with the cluster, not with what a user wrote.

// PodSlots is how many pods the cluster's nodes admit together, by their
// allocatable pods alone: an upper bound on the pods of any workload that
// can run at once.
func (s *Snapshot) PodSlots() int64 {
	var slots int64
	for _, id := range s.liveNodes() {
		slots += max(s.nodes[id].allowedPods, 0)
	}
	return slots
}

// overSlots answers a rollout of more replicas than the cluster's nodes
// admit without simulating it: it cannot complete, and the pod past the
// bound is the one left Pending. ok is false for a workload within the
// bound, which is simulated.
func (s *Snapshot) overSlots(w *Workload) (r Rollout, ok bool) {
	slots := s.PodSlots()
	if int64(w.Replicas) <= slots {
		return Rollout{}, false
	}
	msg := fmt.Sprintf("0/%d nodes are available: %d replicas exceed the %d pods the cluster's nodes admit together (their allocatable pods).",
		s.NodeCount(), w.Replicas, slots)
	r.Blocked = &Verdict{Reasons: map[string]int{ReasonTooManyPods: s.NodeCount()}, Message: msg}
	r.Slots = slots
	r.BlockedPod = w.Name + "-" + newRevisionHash + "-" + strconv.FormatInt(slots, 10)
	return r, true
}
