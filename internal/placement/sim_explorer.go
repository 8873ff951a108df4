package placement

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// explorer walks every order in which a rollout's events can happen,
// depth first, on one evaluator whose accounting it undoes on the way
// back. Equivalent choices (two empty nodes of one zone, two old pods
// ranked alike on one node) are tried once, and a state reached twice is
// explored once.
type explorer struct {
	s *Snapshot
	w *Workload
	e *evaluator
	// sc scores the nodes a new pod may go to: the search branches over
	// the scheduler's best set only.
	sc   *scorer
	pod  *corev1.Pod
	anti []affinityTerm
	req  resources
	// ours indexes, in e.spreads, the spread being judged.
	ours int

	replicas, maxSurge, maxUnavailable int
	recreate                           bool
	// highestOrdinal and partition bound a StatefulSet's rolling update.
	highestOrdinal, partition int

	old    []oldPod
	oldBy  map[string]int
	gone   []bool
	marked []bool
	newOn  []int32
	// pending counts the new pods created and not yet placed; created
	// counts every new pod.
	pending, created int

	// perNode marks the topologies whose every domain is a single node:
	// there a node's identity does not matter, only its counts.
	perNode map[*topology]bool

	seen   map[uint64]struct{}
	hash   uint64
	budget int
	// work counts node checks, bounded by maxEndStateWork.
	work     int
	outcomes map[string]EndState
	stuck    bool
	cut      bool
}

// oldPod is a pod of the old revision, with what the ReplicaSet controller
// ranks it by that a rollout does not change.
type oldPod struct {
	id   podID
	pos  int
	name string
	rank staticRank
}

func (s *Snapshot) newExplorer(w *Workload, c Constraint, budget int) (*explorer, error) {
	old := s.workloadPods(w.Pods)
	k := rolloutsOf(w.Kind)
	template := k.searchTemplate(s, w)
	e, err := s.newEvaluator(template)
	if err != nil {
		return nil, err
	}
	anti, err := requiredAntiAffinityTerms(template)
	if err != nil {
		return nil, err
	}
	sc, err := newScorer(e, e.profile, ownerSelector(w, template))
	if err != nil {
		return nil, err
	}
	x := &explorer{
		s: s, w: w, e: e, sc: sc, pod: template, anti: anti, req: podRequests(template),
		ours:     ourSpread(&w.Template.Spec, c, w),
		replicas: int(w.Replicas), oldBy: map[string]int{},
		newOn:   make([]int32, len(e.order)),
		perNode: map[*topology]bool{},
		seen:    map[uint64]struct{}{}, budget: budget, outcomes: map[string]EndState{},
	}
	for _, id := range old {
		pi := s.pods[id]
		x.oldBy[pi.name] = len(x.old)
		x.old = append(x.old, oldPod{id: id, pos: e.boundPos(pi), name: pi.name, rank: rankOf(pi)})
	}
	x.gone, x.marked = make([]bool, len(x.old)), make([]bool, len(x.old))
	if err := k.startSearch(x); err != nil {
		return nil, err
	}
	for _, t := range x.topologies() {
		x.perNode[t] = singleNodeDomains(t)
	}
	return x, nil
}

// placements are the nodes a new pod may go to now, one per class of
// equivalent nodes, those that crowd the judged spread most first, so that
// a budget that runs out has tried the worst cases.
func (x *explorer) placements() []int {
	var out []int
	classes := map[string]bool{}
	if x.work += len(x.e.candidates); x.work > maxEndStateWork {
		x.cut = true
		return nil
	}
	for _, i := range x.choices(x.e.feasible()) {
		sig := x.signature(i)
		if classes[sig] {
			continue
		}
		classes[sig] = true
		out = append(out, i)
	}
	if x.ours >= 0 {
		st := x.e.spreads[x.ours]
		sort.SliceStable(out, func(a, b int) bool {
			return st.counts[st.topo.domainOf[out[a]]] > st.counts[st.topo.domainOf[out[b]]]
		})
	}
	return out
}

// choices are the feasible nodes the scheduler may pick: those of the
// best total score, every tie among them. Where it scores only a sample
// of the feasible nodes, the one it picks depends on where its cycle
// starts, and every feasible node stays a choice.
func (x *explorer) choices(feasible []int) []int {
	if len(feasible) <= 1 || x.e.profile.sampled(len(x.e.order), len(feasible)) {
		return feasible
	}
	totals, _ := x.sc.totals(feasible, false)
	return appendBest(nil, feasible, totals)
}

func (x *explorer) bindNew(i int, pod *corev1.Pod) {
	x.e.simulateBind(pod, x.anti, x.req, i)
	x.setNew(i, x.newOn[i]+1)
}

func (x *explorer) unbindNew(i int, pod *corev1.Pod) {
	x.e.account(pod, pod.DeletionTimestamp != nil, x.anti, x.req, i, -1)
	x.setNew(i, x.newOn[i]-1)
}

func (x *explorer) removeOld(k int) {
	x.e.simulateRemove(x.old[k].id)
	x.setOld(k, true, false)
}

// restoreOld brings a removed old pod back, marked for deletion or not as
// it was.
func (x *explorer) restoreOld(k int, marked bool) {
	x.setOld(k, false, marked)
	if pos := x.old[k].pos; pos >= 0 {
		pi := x.s.pods[x.old[k].id]
		x.e.account(pi.common(), pi.terminating(), pi.antiTerms(), pi.requests, pos, 1)
	}
}

// markStuck records a state with no way on, unless the search was cut
// short there.
func (x *explorer) markStuck(moved *bool) {
	if !*moved && !x.cut {
		x.stuck = true
	}
}

func (x *explorer) oldLeft() int {
	n := 0
	for k := range x.old {
		if !x.gone[k] {
			n++
		}
	}
	return n
}
