package placement

import (
	"math"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// staticRank holds the first criteria of the ReplicaSet controller's choice
// of pods to delete (ActivePodsWithRanks in kube-controller-manager):
// unassigned before assigned, Pending before Unknown before Running, not
// Ready before Ready, lower pod-deletion-cost first. What follows them,
// the number of the Deployment's pods sharing the node, changes during a
// rollout; the criteria after that (ready time and creation time on a
// logarithmic scale relative to now, then the uid) depend on when the
// controller looks, so pods equal up to there are all possible choices.
type staticRank struct {
	assigned bool
	phase    int
	ready    bool
	cost     int64
}

func (a staticRank) less(b staticRank) bool {
	if a.assigned != b.assigned {
		return !a.assigned
	}
	if a.phase != b.phase {
		return a.phase < b.phase
	}
	if a.ready != b.ready {
		return !a.ready
	}
	return a.cost < b.cost
}

func rankOf(p *podInfo) staticRank {
	r := staticRank{assigned: p.nodeName != "", phase: 2}
	switch p.phase {
	case corev1.PodPending:
		r.phase = 0
	case corev1.PodUnknown:
		r.phase = 1
	}
	status, _, _ := p.ready()
	r.ready = status == corev1.ConditionTrue
	r.cost = parseDeletionCost(p.annotation(corev1.PodDeletionCost))
	return r
}

// parseDeletionCost parses pod-deletion-cost as the controller does: an int32
// written without a plus sign or leading zeros, anything else 0. The API
// server refuses such values on live pods; a snapshot read from files
// may still hold them.
func parseDeletionCost(v string) int64 {
	if v == "" || v[0] == '+' || (v[0] == '0' && v != "0") {
		return 0
	}
	cost, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0
	}
	return cost
}

// SetNow sets when the ReplicaSet controller is taken to look at the pods
// it scales down. It compares ready and creation times on a logarithmic
// scale of their age then, and pods of one power of two apart by uid; with
// the zero time (the default) the newer time goes first, as the
// controller does when it has no clock. The operator leaves it unset: it
// predicts rollouts to come, whose moment nobody knows, and a prediction
// that changed as pods aged would rewrite a settled migration's status.
func (s *Snapshot) SetNow(t time.Time) { s.now = t }

// scaleDownCandidate is an old pod with the number of the workload's active
// pods that share its node, which the controller ranks it by, and the rest
// of what it ranks by, read once: a rollout's simulation orders its old
// pods at every step.
type scaleDownCandidate struct {
	id        podID
	colocated int
	pod       *podInfo
	rank      staticRank
	ready     time.Time
	restarts  restarts
}

// orderForScaleDown sorts old pods in the order the ReplicaSet controller
// deletes them when it scales a revision down (ActivePodsWithRanks in
// kube-controller-manager): unassigned first, then Pending before Unknown
// before Running, not Ready before Ready, lower pod-deletion-cost, more of
// the workload's pods on the same node, more recently Ready, more restarts,
// more recently created. Pods the controller cannot tell apart keep the
// snapshot's name order, so the simulation is repeatable. Only the first n
// are put in order when that is cheaper; the rest follow in any order.
func (s *Snapshot) orderForScaleDown(cs []scaleDownCandidate, n int) {
	for i := range cs {
		c := &cs[i]
		c.pod = s.pods[c.id]
		c.rank, c.ready, c.restarts = rankOf(c.pod), readySince(c.pod), maxRestarts(c.pod)
	}
	less := func(a, b *scaleDownCandidate) bool {
		if before, decided := s.scaleDownBefore(a, b); decided {
			return before
		}
		return a.pod.name < b.pod.name
	}
	// Names are unique among a workload's pods, so less is a strict order
	// and the first n of a full sort are the n least, found by selection.
	if n*8 < len(cs) {
		for i := range n {
			least := i
			for j := i + 1; j < len(cs); j++ {
				if less(&cs[j], &cs[least]) {
					least = j
				}
			}
			cs[i], cs[least] = cs[least], cs[i]
		}
		return
	}
	slices.SortStableFunc(cs, func(a, b scaleDownCandidate) int {
		switch {
		case less(&a, &b):
			return -1
		case less(&b, &a):
			return 1
		}
		return 0
	})
}

// scaleDownBefore reports whether the controller deletes a before b, and
// whether it tells them apart at all.
func (s *Snapshot) scaleDownBefore(a, b *scaleDownCandidate) (before, decided bool) {
	if a.rank != b.rank {
		return a.rank.less(b.rank), true
	}
	if a.colocated != b.colocated {
		return a.colocated > b.colocated, true
	}
	if a.rank.ready {
		if !a.ready.Equal(b.ready) {
			return s.youngerFirst(a.ready, b.ready, a.pod, b.pod), true
		}
	}
	if a.restarts != b.restarts {
		return restartsBefore(a.restarts, b.restarts), true
	}
	if !a.pod.created.Equal(&b.pod.created) {
		return s.youngerFirst(a.pod.created.Time, b.pod.created.Time, a.pod, b.pod), true
	}
	return false, false
}

// youngerFirst compares two times of a and b as the controller does: the
// later first, on a logarithmic scale of age when it has a clock, the uid
// deciding within one power of two.
func (s *Snapshot) youngerFirst(ta, tb time.Time, a, b *podInfo) bool {
	if s.now.IsZero() || ta.IsZero() || tb.IsZero() {
		if ta.IsZero() || tb.IsZero() {
			return ta.IsZero()
		}
		return ta.After(tb)
	}
	da, db := ageBucket(s.now.Sub(ta)), ageBucket(s.now.Sub(tb))
	if da == db {
		return a.uid < b.uid
	}
	return da < db
}

// ageBucket is the power of two of an age in nanoseconds; -1 when the
// time is not in the past.
func ageBucket(d time.Duration) int64 {
	if d <= 0 {
		return -1
	}
	return int64(math.Log2(float64(d)))
}

// scaleDownVictims are the old pods the controller deletes in one pass:
// those not running, which never count as available, and then as many
// running ones as surplus availability allows, in its order of
// preference. newOn and pending are the new revision's pods per node and
// unplaced, which count among the pods sharing a node. buf, when not nil,
// is reused from one pass to the next of a simulation.
func (s *Snapshot) scaleDownVictims(old []podID, newOn map[nodeID]int, pending, surplus int, buf *scaleDownBuffers) []podID {
	n := max(0, surplus)
	for _, id := range old {
		if s.pods[id].node == noNode {
			n++
		}
	}
	if n == 0 || len(old) == 0 {
		return nil
	}
	if buf == nil {
		buf = &scaleDownBuffers{}
	}
	if buf.onNode == nil {
		buf.onNode = map[nodeID]int{}
	}
	onNode := buf.onNode
	clear(onNode)
	onNode[noNode] = pending
	for id, n := range newOn {
		onNode[id] += n
	}
	if cap(buf.candidates) < len(old) {
		buf.candidates = make([]scaleDownCandidate, 0, len(old))
	}
	cs := buf.candidates[:0]
	for _, id := range old {
		onNode[s.pods[id].node]++
		cs = append(cs, scaleDownCandidate{id: id})
	}
	buf.candidates = cs
	for i := range cs {
		cs[i].colocated = onNode[s.pods[cs[i].id].node]
	}
	s.orderForScaleDown(cs, n)
	out := make([]podID, 0, min(n, len(cs)))
	for _, c := range cs[:min(n, len(cs))] {
		out = append(out, c.id)
	}
	return out
}

// scaleDownBuffers are what scaleDownVictims builds at every pass, kept
// from one pass of a simulation to the next.
type scaleDownBuffers struct {
	onNode     map[nodeID]int
	candidates []scaleDownCandidate
}

// withoutPods returns ids less those in gone, filtering ids in place: a
// rollout's simulation deletes a victim or a few at a step, from the list
// of old pods it owns.
func withoutPods(ids, gone []podID) []podID {
	switch {
	case len(gone) == 0:
		return ids
	case len(gone) <= 16:
		return slices.DeleteFunc(ids, func(id podID) bool { return slices.Contains(gone, id) })
	}
	drop := make(map[podID]bool, len(gone))
	for _, id := range gone {
		drop[id] = true
	}
	return slices.DeleteFunc(ids, func(id podID) bool { return drop[id] })
}

// ScaleDownVictims are the names of the n pods of w the ReplicaSet
// controller deletes when it scales w's pods down by n, in its order of
// preference. related are the owner's other pods (a Deployment's other
// revisions during a rollout), which count among the pods sharing a node;
// those being deleted or finished count for nothing, as for the
// controller.
func (s *Snapshot) ScaleDownVictims(w *Workload, n int, related ...*corev1.Pod) []string {
	old := s.workloadPods(w.Pods)
	unassigned := 0
	for _, id := range old {
		if s.pods[id].node == noNode {
			unassigned++
		}
	}
	newOn, pending := map[nodeID]int{}, 0
	for _, p := range related {
		switch {
		case p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
		case p.Spec.NodeName == "":
			pending++
		default:
			if id, ok := s.nodeByName[p.Spec.NodeName]; ok {
				newOn[id]++
			}
		}
	}
	var names []string
	for _, id := range s.scaleDownVictims(old, newOn, pending, n-unassigned, nil) {
		names = append(names, s.pods[id].name)
	}
	return names
}
