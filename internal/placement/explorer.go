package placement

import (
	"fmt"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// explorer walks every order in which a rollout's events can happen,
// depth first, on one evaluator whose accounting it undoes on the way
// back. Equivalent choices (two empty nodes of one zone, two old pods
// ranked alike on one node) are tried once, and a state reached twice is
// explored once.
type explorer struct {
	s    *Snapshot
	w    *Workload
	e    *evaluator
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

func (s *Snapshot) newExplorer(w *Workload, c Constraint, budget int) (*explorer, error) {
	old := s.workloadPods(w.Pods)
	template := newPod(w, w.Name+"-new", map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: newRevisionHash})
	if w.Kind == StatefulSet {
		template = statefulSetPod(s, w, max(int(w.Replicas)-1, 0))
	}
	e, err := s.newEvaluator(template)
	if err != nil {
		return nil, err
	}
	anti, err := requiredAntiAffinityTerms(template)
	if err != nil {
		return nil, err
	}
	x := &explorer{
		s: s, w: w, e: e, pod: template, anti: anti, req: podRequests(template),
		ours:     ourSpread(&w.Template.Spec, c, w),
		replicas: int(w.Replicas), oldBy: map[string]int{},
		newOn:   make([]int32, len(e.order)),
		perNode: map[*topology]bool{},
		seen:    map[uint64]struct{}{}, budget: budget, outcomes: map[string]EndState{},
	}
	for _, id := range old {
		pi := s.pods[id]
		x.oldBy[pi.pod.Name] = len(x.old)
		x.old = append(x.old, oldPod{id: id, pos: e.boundPos(pi), name: pi.pod.Name, rank: rankOf(pi.pod)})
	}
	x.gone, x.marked = make([]bool, len(x.old)), make([]bool, len(x.old))
	switch w.Kind {
	case Deployment:
		x.recreate = w.Strategy.Type == appsv1.RecreateDeploymentStrategyType
		x.maxUnavailable = x.replicas
		if !x.recreate {
			if x.maxSurge, x.maxUnavailable, err = SurgeAndUnavailable(w.Strategy, w.Replicas); err != nil {
				return nil, err
			}
		}
	case StatefulSet:
		x.highestOrdinal = x.replicas - 1
		if ru := w.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
			x.partition = int(*ru.Partition)
		}
	}
	for _, t := range x.topologies() {
		x.perNode[t] = singleNodeDomains(t)
	}
	return x, nil
}

func rankOf(p *corev1.Pod) staticRank {
	r := staticRank{assigned: p.Spec.NodeName != "", phase: 2}
	switch p.Status.Phase {
	case corev1.PodPending:
		r.phase = 0
	case corev1.PodUnknown:
		r.phase = 1
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			r.ready = c.Status == corev1.ConditionTrue
		}
	}
	if v, ok := p.Annotations[corev1.PodDeletionCost]; ok {
		if cost, err := strconv.ParseInt(v, 10, 32); err == nil {
			r.cost = cost
		}
	}
	return r
}

// topologies are those the evaluator counts pods in.
func (x *explorer) topologies() []*topology {
	var out []*topology
	for _, st := range x.e.spreads {
		out = append(out, st.topo)
	}
	for _, tc := range x.e.anti {
		out = append(out, tc.topo)
	}
	for _, tc := range x.e.affinity {
		out = append(out, tc.topo)
	}
	for _, dc := range x.e.existingAnti {
		out = append(out, dc.topo)
	}
	return out
}

func singleNodeDomains(t *topology) bool {
	seen := make([]bool, len(t.names))
	for _, d := range t.domainOf {
		if d < 0 {
			continue
		}
		if seen[d] {
			return false
		}
		seen[d] = true
	}
	return true
}

// enter marks the current state visited; false when it was already, or
// when the budget is spent. States are told apart by a Zobrist hash kept
// up to date by every move, so that a state costs no more on 5,000 nodes
// than on 5.
func (x *explorer) enter(prefix int) bool {
	if len(x.seen) >= x.budget {
		x.cut = true
		return false
	}
	key := x.hash ^ mix(3, uint64(prefix+1), uint64(x.created)<<32|uint64(x.pending))
	if _, ok := x.seen[key]; ok {
		return false
	}
	x.seen[key] = struct{}{}
	return true
}

// mix is splitmix64's finaliser over a tagged pair: the hash of one fact
// about a state (a node holding n new pods, an old pod being gone).
func mix(tag, a, b uint64) uint64 {
	z := tag*0x9e3779b97f4a7c15 ^ a*0xbf58476d1ce4e5b9 ^ b*0x94d049bb133111eb
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// setNew and setOld change the state and its hash together.
func (x *explorer) setNew(i int, n int32) {
	x.hash ^= mix(1, uint64(i), uint64(x.newOn[i])) ^ mix(1, uint64(i), uint64(n))
	x.newOn[i] = n
}

func (x *explorer) setOld(k int, gone, marked bool) {
	x.hash ^= mix(2, uint64(k), oldState(x.gone[k], x.marked[k])) ^ mix(2, uint64(k), oldState(gone, marked))
	x.gone[k], x.marked[k] = gone, marked
}

func oldState(gone, marked bool) uint64 {
	switch {
	case gone:
		return 2
	case marked:
		return 1
	}
	return 0
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
	for _, i := range x.e.candidates {
		if !x.e.fits(i) {
			continue
		}
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

// signature describes what a node's future depends on: its domains (or,
// where every domain is one node, only the counts), the pods counted there,
// the workload's pods on it, and its resources.
func (x *explorer) signature(i int) string {
	b := make([]byte, 0, 64)
	judged := x.e.spreads[x.ours].topo
	domain := func(t *topology, counts []int32) {
		d := t.domainOf[i]
		// The judged topology's domains are what an end state reports, so
		// they are never interchangeable.
		if !x.perNode[t] || t == judged {
			b = strconv.AppendInt(b, int64(d), 10)
			b = append(b, ':')
		}
		if d >= 0 {
			b = strconv.AppendInt(b, int64(counts[d]), 10)
		}
		b = append(b, ';')
	}
	for _, st := range x.e.spreads {
		domain(st.topo, st.counts)
	}
	for _, tc := range x.e.anti {
		domain(tc.topo, tc.counts)
	}
	for _, tc := range x.e.affinity {
		domain(tc.topo, tc.counts)
	}
	keys := make([]string, 0, len(x.e.existingAnti))
	for k := range x.e.existingAnti {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		dc := x.e.existingAnti[k]
		domain(dc.topo, dc.counts)
	}
	b = strconv.AppendInt(b, int64(x.newOn[i]), 10)
	b = append(b, '|')
	for k := range x.old {
		if o := x.old[k]; o.pos == i && !x.gone[k] {
			b = strconv.AppendBool(b, o.rank.ready)
			b = strconv.AppendInt(b, int64(o.rank.phase), 10)
			b = strconv.AppendInt(b, o.rank.cost, 10)
			b = strconv.AppendBool(b, x.marked[k])
			b = append(b, ',')
		}
	}
	ni := x.s.nodes[x.e.order[i]]
	used := ni.requested
	used.add(x.e.extraReq[i])
	b = appendResources(append(b, '|'), used)
	b = appendResources(append(b, '|'), ni.allocatable)
	b = strconv.AppendInt(append(b, '|'), int64(len(ni.pods))+int64(x.e.extraPods[i]), 10)
	b = strconv.AppendInt(append(b, '/'), ni.allowedPods, 10)
	return string(b)
}

func appendResources(b []byte, r resources) []byte {
	b = strconv.AppendInt(b, r.milliCPU, 10)
	b = strconv.AppendInt(append(b, ','), r.memory, 10)
	b = strconv.AppendInt(append(b, ','), r.ephemeralStorage, 10)
	if len(r.scalar) > 0 {
		b = fmt.Append(b, r.scalar)
	}
	return b
}

func (x *explorer) bindNew(i int, pod *corev1.Pod) {
	x.e.simulateBind(pod, x.anti, x.req, i)
	x.setNew(i, x.newOn[i]+1)
}

func (x *explorer) unbindNew(i int, pod *corev1.Pod) {
	x.e.account(pod, x.anti, x.req, i, -1)
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
		x.e.account(pi.pod, pi.antiTerms, pi.requests, pos, 1)
	}
}

// visitStatefulSet replaces the pods from the highest ordinal down to the
// partition, one at a time, as the StatefulSet controller does: the old
// pod goes, and its successor, with the same name and claims, is placed on
// any node that admits it.
func (x *explorer) visitStatefulSet(ord int) {
	if !x.enter(ord) {
		return
	}
	if ord < x.partition || ord < 0 {
		x.record()
		return
	}
	name := x.w.Name + "-" + strconv.Itoa(ord)
	pod := statefulSetPod(x.s, x.w, ord)
	k, existed := x.oldBy[name]
	if existed {
		x.removeOld(k)
		defer x.restoreOld(k, false)
	}
	x.e.useVolumesOf(pod)
	nodes := x.placements()
	if len(nodes) == 0 && !x.cut {
		x.stuck = true
		return
	}
	for _, i := range nodes {
		x.bindNew(i, pod)
		x.visitStatefulSet(ord - 1)
		x.unbindNew(i, pod)
		x.e.useVolumesOf(pod)
	}
}

// visitDeployment takes, from the current state, every event that can come
// next: the scheduler seeing an old pod's deletion, the scheduler placing a
// Pending new pod, or the Deployment controller scaling.
func (x *explorer) visitDeployment() {
	if !x.enter(-1) {
		return
	}
	if x.created == x.replicas && x.pending == 0 && x.oldLeft() == 0 {
		x.record()
		return
	}
	var moved bool
	defer x.markStuck(&moved)
	for k := range x.old {
		// Deletions are independent of each other: the first marked pod
		// stands for all of them, which keeps every interleaving with
		// placements while not permuting the deletions themselves.
		if x.marked[k] && !x.gone[k] {
			moved = true
			x.removeOld(k)
			x.visitDeployment()
			x.restoreOld(k, true)
			break
		}
	}
	if x.pending > 0 {
		for _, i := range x.placements() {
			moved = true
			x.pending--
			x.bindNew(i, x.pod)
			x.visitDeployment()
			x.unbindNew(i, x.pod)
			x.pending++
		}
	}
	create, victims := x.scale()
	if create > 0 || victims > 0 {
		for _, chosen := range x.victimChoices(victims) {
			moved = true
			x.created += create
			x.pending += create
			for _, k := range chosen {
				x.setOld(k, false, true)
			}
			x.visitDeployment()
			for _, k := range chosen {
				x.setOld(k, false, false)
			}
			x.created -= create
			x.pending -= create
		}
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

// scale is one sync of the Deployment controller: how many new pods it
// creates and how many old ones it scales down, from the replica counts
// of both ReplicaSets and the new pods that are available (placed pods
// become Ready at once here: kwok and most rollouts without
// minReadySeconds). It follows rolloutRolling: scale the new ReplicaSet up
// within replicas+maxSurge, clean up unhealthy old pods, then scale down
// healthy ones while replicas-maxUnavailable stay available.
func (x *explorer) scale() (create, scaleDown int) {
	oldSpec, oldAvailable := 0, 0
	for k, o := range x.old {
		if x.gone[k] || x.marked[k] {
			continue
		}
		oldSpec++
		if o.rank.assigned && o.rank.ready && o.rank.phase == 2 {
			oldAvailable++
		}
	}
	if x.recreate {
		if oldSpec > 0 {
			return 0, oldSpec
		}
		if x.oldLeft() > 0 {
			return 0, 0
		}
		return x.replicas - x.created, 0
	}
	create = max(0, min(x.replicas, x.replicas+x.maxSurge-oldSpec)-x.created)
	available := x.created - x.pending
	minAvailable := x.replicas - x.maxUnavailable
	maxScaledDown := oldSpec + available - minAvailable
	if maxScaledDown <= 0 || oldSpec == 0 {
		return create, 0
	}
	cleanup := min(oldSpec-oldAvailable, maxScaledDown)
	healthy := max(0, min(oldSpec-cleanup, oldAvailable+available-minAvailable))
	return create, cleanup + healthy
}

// victimChoices lists the sets of n old pods the ReplicaSet controller may
// delete: ranked by staticRank, then by how many of the Deployment's active
// pods share the pod's node, more first; among pods equal so far, every
// choice of distinct nodes' pods is possible.
// maxVictimChoices bounds the sets of victims tried at one scale-down.
const maxVictimChoices = 64

func (x *explorer) victimChoices(n int) [][]int {
	if n == 0 {
		return [][]int{nil}
	}
	var active []int
	onNode := map[int]int{}
	for k, o := range x.old {
		if !x.gone[k] && !x.marked[k] {
			active = append(active, k)
			onNode[o.pos]++
		}
	}
	for i, c := range x.newOn {
		onNode[i] += int(c)
	}
	onNode[-1] += x.pending
	sort.SliceStable(active, func(a, b int) bool {
		oa, ob := x.old[active[a]], x.old[active[b]]
		if oa.rank != ob.rank {
			return oa.rank.less(ob.rank)
		}
		return onNode[oa.pos] > onNode[ob.pos]
	})
	if n >= len(active) {
		return [][]int{active}
	}
	equal := func(a, b int) bool {
		oa, ob := x.old[a], x.old[b]
		return oa.rank == ob.rank && onNode[oa.pos] == onNode[ob.pos]
	}
	// The pods strictly before the boundary's group are always deleted.
	start := n - 1
	for start > 0 && equal(active[start-1], active[n-1]) {
		start--
	}
	end := n
	for end < len(active) && equal(active[end], active[n-1]) {
		end++
	}
	fixed := active[:start]
	need := n - start
	// Group the tied pods by node: pods of one node are interchangeable.
	var nodes []int
	byNode := map[int][]int{}
	for _, k := range active[start:end] {
		pos := x.old[k].pos
		if _, ok := byNode[pos]; !ok {
			nodes = append(nodes, pos)
		}
		byNode[pos] = append(byNode[pos], k)
	}
	// after[j] is how many tied pods the nodes from j on hold: a branch
	// that cannot reach its count is not entered.
	after := make([]int, len(nodes)+1)
	for j := len(nodes) - 1; j >= 0; j-- {
		after[j] = after[j+1] + len(byNode[nodes[j]])
	}
	var out [][]int
	var pick func(j, left int, chosen []int)
	pick = func(j, left int, chosen []int) {
		if left == 0 {
			out = append(out, append(append([]int(nil), fixed...), chosen...))
			return
		}
		if after[j] < left {
			return
		}
		// Many tied pods on many nodes (a large Deployment) make more
		// choices than any search can try: try the first ones and say
		// the search is partial.
		if len(out) >= maxVictimChoices {
			x.cut = true
			return
		}
		pods := byNode[nodes[j]]
		for take := min(left, len(pods)); take >= 0; take-- {
			pick(j+1, left-take, append(chosen, pods[:take]...))
		}
	}
	pick(0, need, nil)
	return out
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
		if _, ok := s.claims[w.Namespace+"/"+claimName]; !ok {
			continue
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: ct.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName},
		}})
	}
	return pod
}
