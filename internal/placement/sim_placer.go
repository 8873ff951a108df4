package placement

import (
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// placer places the pods of one template, remembering where it put them.
type placer struct {
	e         *evaluator
	antiTerms []affinityTerm
	req       resources
	// own counts the workload's pods per evaluated node, to prefer spreading
	// them as the scheduler's scoring would.
	own []int32
	// ranked are the candidates in the order a placement prefers them
	// (better, then the lower position, as a scan of the candidates in
	// position order keeping the best that fits would choose), and
	// candidate marks the positions in it. A placement takes the first
	// that fits instead of scanning every node; only the node a pod was
	// bound to or removed from moves.
	ranked    []int
	candidate []bool
	// loads are the candidates' loads at the last ranking, by position.
	loads []float64
	// rankedSet is the evaluator's candidatesSet ranked is of.
	rankedSet int
}

func (s *Snapshot) newPlacer(pod *corev1.Pod, old []podID) (*placer, error) {
	return s.newPlacerWith(pod, old, evalOptions{})
}

func (s *Snapshot) newPlacerWith(pod *corev1.Pod, old []podID, opts evalOptions) (*placer, error) {
	e, err := s.newEvaluatorWith(pod, opts)
	if err != nil {
		return nil, err
	}
	anti, err := requiredAntiAffinityTerms(pod)
	if err != nil {
		return nil, err
	}
	p := &placer{e: e, antiTerms: anti, req: podRequests(pod), own: s.spares.int32s.take(len(e.order))}
	for _, id := range old {
		if i := e.boundPos(s.pods[id]); i >= 0 {
			p.own[i]++
		}
	}
	p.rank()
	return p, nil
}

// rank puts the evaluator's candidates in order of preference. Before the
// simulation has placed or removed anything, the loads are the snapshot's,
// whose order it keeps: the candidates are then only grouped by their
// count of the workload's pods, in one pass (a sort of every candidate per
// placer was a quarter of a judgement).
func (p *placer) rank() {
	e := p.e
	if p.candidate == nil {
		p.candidate = e.s.spares.bools.take(len(e.order))
	}
	clear(p.candidate)
	for _, i := range e.candidates {
		p.candidate[i] = true
	}
	if e.extras.untouched() && e.altered == nil {
		p.rankByOwn(e.s.positionsByLoad())
	} else {
		p.rankBySort()
	}
	p.rankedSet = e.candidatesSet
}

// rankByOwn ranks the candidates by their count of the workload's pods,
// keeping the order of byLoad among equals: a counting sort.
func (p *placer) rankByOwn(byLoad []int32) {
	maxOwn := int32(0)
	for _, i := range p.e.candidates {
		maxOwn = max(maxOwn, p.own[i])
	}
	start := make([]int, maxOwn+2)
	for _, i := range p.e.candidates {
		start[p.own[i]+1]++
	}
	for o := 1; o < len(start); o++ {
		start[o] += start[o-1]
	}
	if p.ranked == nil {
		p.ranked = p.e.s.spares.ints.take(len(p.e.order))
	}
	p.ranked = slices.Grow(p.ranked[:0], len(p.e.candidates))[:len(p.e.candidates)]
	for _, pos := range byLoad {
		if i := int(pos); p.candidate[i] {
			p.ranked[start[p.own[i]]] = i
			start[p.own[i]]++
		}
	}
}

// rankBySort ranks the candidates by their own pods and their loads as
// the simulation has left them.
func (p *placer) rankBySort() {
	e := p.e
	if p.loads == nil {
		p.loads = e.s.spares.float64s.take(len(e.order))
	}
	loads := p.loads
	for _, i := range e.candidates {
		loads[i] = p.load(i)
	}
	if p.ranked == nil {
		p.ranked = e.s.spares.ints.take(len(e.order))
	}
	p.ranked = append(p.ranked[:0], e.candidates...)
	slices.SortFunc(p.ranked, func(i, j int) int {
		switch {
		case p.own[i] != p.own[j]:
			return int(p.own[i] - p.own[j])
		case loads[i] < loads[j]:
			return -1
		case loads[j] < loads[i]:
			return 1
		}
		return i - j
	})
}

// place finds a node for pod, binds it there in the simulation and returns
// the node's position, or -1 when no node passes the filters: the best
// node that fits, the lower position among equals.
func (p *placer) place(pod *corev1.Pod) int {
	if p.rankedSet != p.e.candidatesSet {
		p.rank()
	}
	for k, i := range p.ranked {
		if p.e.fits(i) {
			p.e.simulateBind(pod, p.antiTerms, p.req, i)
			p.own[i]++
			p.rerank(k)
			return i
		}
	}
	return -1
}

// compare orders positions i and j as ranked holds them.
func (p *placer) compare(i, j int) int {
	switch {
	case p.better(i, j):
		return -1
	case p.better(j, i):
		return 1
	}
	return i - j
}

// rankOf is the index in ranked of the candidate at position i, found
// before its own pods or its load change; -1 for no candidate.
func (p *placer) rankOf(i int) int {
	if p.rankedSet != p.e.candidatesSet {
		p.rank()
	}
	if i < 0 || !p.candidate[i] {
		return -1
	}
	if k, found := slices.BinarySearchFunc(p.ranked, i, p.compare); found {
		return k
	}
	// Unreachable while ranked holds the order of the current loads; a
	// scan keeps a placement right if it ever does not.
	return slices.Index(p.ranked, i)
}

// rerank moves the candidate at index k of ranked to its place after its
// own pods or its load changed.
func (p *placer) rerank(k int) {
	if k < 0 {
		return
	}
	i := p.ranked[k]
	p.ranked = slices.Delete(p.ranked, k, k+1)
	to, _ := slices.BinarySearchFunc(p.ranked, i, p.compare)
	p.ranked = slices.Insert(p.ranked, to, i)
}

// better approximates the scheduler's scoring: fewer of the workload's own
// pods first, then the less requested node.
func (p *placer) better(i, j int) bool {
	if p.own[i] != p.own[j] {
		return p.own[i] < p.own[j]
	}
	return p.load(i) < p.load(j)
}

func (p *placer) load(i int) float64 {
	return nodeLoad(p.e.s.nodes[p.e.order[i]], p.e.extras.milliCPU(i))
}

// nodeLoad is the share of a node's CPU requested, with extra more.
func nodeLoad(ni *nodeInfo, extra int64) float64 {
	if ni.allocatable.milliCPU == 0 {
		return math.Inf(1)
	}
	return float64(ni.requested.milliCPU+extra) / float64(ni.allocatable.milliCPU)
}

// positionsByLoad are the live nodes' positions, the least requested
// first, the lower position among equals; kept until a pod, a node's
// allocatable or the nodes change. The slice is shared: callers must not
// change it.
func (s *Snapshot) positionsByLoad() []int32 {
	if s.byLoad != nil {
		return s.byLoad
	}
	order := s.liveNodes()
	loads := make([]float64, len(order))
	byLoad := make([]int32, len(order))
	for i, id := range order {
		loads[i], byLoad[i] = nodeLoad(s.nodes[id], 0), int32(i)
	}
	slices.SortFunc(byLoad, func(a, b int32) int {
		switch {
		case loads[a] < loads[b]:
			return -1
		case loads[b] < loads[a]:
			return 1
		}
		return int(a - b)
	})
	s.byLoad = byLoad
	return byLoad
}

func (p *placer) remove(id podID) {
	i := p.e.boundPos(p.e.s.pods[id])
	k := p.rankOf(i)
	if i >= 0 {
		p.own[i]--
	}
	p.e.simulateRemove(id)
	p.rerank(k)
}

// forget takes pods that are already going away out of the simulation;
// unlike remove, they were never counted among the workload's own.
func (p *placer) forget(ids []podID) {
	for _, id := range ids {
		k := p.rankOf(p.e.boundPos(p.e.s.pods[id]))
		p.e.simulateRemove(id)
		p.rerank(k)
	}
}

func (p *placer) nodeName(i int) string { return p.e.s.nodes[p.e.order[i]].node.Name }

// newPod materialises a pod of the new revision.
func newPod(w *Workload, name string, extraLabels map[string]string) *corev1.Pod {
	lbls := make(map[string]string, len(w.Template.Labels)+len(extraLabels))
	for k, v := range w.Template.Labels {
		lbls[k] = v
	}
	for k, v := range extraLabels {
		lbls[k] = v
	}
	// Simulated pods are only read, so they share the template's spec.
	spec := w.Template.Spec
	spec.NodeName = ""
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: name, Labels: lbls, UID: types.UID(simulatedUIDPrefix + w.Namespace + "/" + name)},
		Spec:       spec,
	}
}

// release gives the placer's arrays back to the snapshot, once its
// simulation has ended: the placer and its evaluator are not used after.
// They are the evaluation's own: what the snapshot keeps between questions
// (node filters, nodes by load, existing pods' anti-affinity) is shared
// read-only or copied for each evaluation, and is not given.
func (p *placer) release() {
	sp, e := &p.e.s.spares, p.e
	sp.int32s.give(p.own)
	sp.ints.give(p.ranked)
	sp.bools.give(p.candidate)
	sp.float64s.give(p.loads)
	for k := range e.anti {
		sp.int32s.give(e.anti[k].counts)
	}
	for k := range e.affinity {
		sp.int32s.give(e.affinity[k].counts)
	}
	for _, dc := range e.existingAntiList {
		sp.int32s.give(dc.counts)
	}
	for _, st := range e.spreads {
		sp.int32s.give(st.counts)
	}
	p.own, p.ranked, p.candidate, p.loads = nil, nil, nil, nil
	e.anti, e.affinity, e.existingAnti, e.existingAntiList, e.spreads = nil, nil, nil, nil, nil
}
