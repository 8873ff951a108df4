package placement

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
)

// placer places the pods of one template one after another, as the
// scheduler does: each to a node of the best total score among those
// that pass the filters, seeing the ones before it as bound. Of tied
// nodes it takes the lowest position; the scheduler picks any of them.
type placer struct {
	e         *evaluator
	sc        *scorer
	antiTerms []affinityTerm
	req       resources
	// feasible is the buffer of the positions that pass the filters.
	feasible []int
	// next is the candidate the next search starts at, as the scheduler
	// starts each cycle where the last stopped.
	next int
	// best is the last search's best set, and sampled whether it scored
	// only some of the feasible nodes.
	best    []int
	sampled bool
	// sets are the candidates of each domain of the hard spreads, made
	// for the candidates set setsFor (setsMade once made); allowed and
	// unionBuf are the walk's buffers.
	sets              []domainSets
	setsFor           int
	setsMade          bool
	allowed, unionBuf []uint64
}

func (s *Snapshot) newPlacer(w *Workload, pod *corev1.Pod) (*placer, error) {
	return s.newPlacerWith(w, pod, evalOptions{})
}

// newPlacerWith places the pods of w's template pod (w nil for a pod that
// names its own controller) under the hypotheses of opts.
func (s *Snapshot) newPlacerWith(w *Workload, pod *corev1.Pod, opts evalOptions) (*placer, error) {
	e, err := s.newEvaluatorWith(pod, opts)
	if err != nil {
		return nil, err
	}
	anti, err := requiredAntiAffinityTerms(pod)
	if err != nil {
		return nil, err
	}
	sc, err := newScorer(e, e.profile, ownerSelector(w, pod))
	if err != nil {
		return nil, err
	}
	e.extras.at, sc.touched = s.spares.extras.take(), s.spares.touched.take()
	return &placer{e: e, sc: sc, antiTerms: anti, req: podRequests(pod)}, nil
}

// ownerSelector is the selector of the controller that owns w's new pods,
// which PodTopologySpread's system default constraints spread pod by: the
// workload's, narrowed to the new revision where the kind's pods carry
// one (a Deployment's new ReplicaSet selects its pod-template-hash). nil
// for no workload.
func ownerSelector(w *Workload, pod *corev1.Pod) labels.Selector {
	if w == nil || w.Selector == nil {
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(w.Selector)
	if err != nil {
		return nil
	}
	if label, value := rolloutsOf(w.Kind).newRevision(); label != "" && pod.Labels[label] == value {
		if r, err := labels.NewRequirement(label, selection.Equals, []string{value}); err == nil {
			sel = sel.Add(*r)
		}
	}
	return sel
}

// place finds a node for pod, binds it there in the simulation and returns
// the node's position, or -1 when no node passes the filters.
func (p *placer) place(pod *corev1.Pod) int {
	i := p.choose()
	if i >= 0 {
		p.e.simulateBind(pod, p.antiTerms, p.req, i)
	}
	return i
}

// choose is the position the next pod goes to, -1 for none.
func (p *placer) choose() int {
	if b := p.bestSet(); len(b) > 0 {
		return b[0]
	}
	return -1
}

// bestSet are the positions of the best total score among the nodes that
// pass the filters now: the scheduler's possible choices. Above 100
// nodes the scheduler scores only the first feasible nodes it finds from
// where its last search stopped; so does the placer, in its own order of
// the nodes, which gives one of the scheduler's possible outcomes.
func (p *placer) bestSet() []int {
	p.feasible = p.feasible[:0]
	cands := p.e.candidates
	want := p.sc.p.feasibleNodesToFind(len(p.e.order))
	n := len(cands)
	if n == 0 || p.e.s.interrupted() || !p.e.anyFits() {
		p.best, p.sampled = p.best[:0], false
		return nil
	}
	start := p.next % n
	searched := p.walk(cands, start, want)
	p.next = (start + searched) % n
	p.sampled = len(p.feasible) == want && searched < n
	if len(p.feasible) <= 1 {
		p.best = append(p.best[:0], p.feasible...)
		return p.feasible
	}
	totals, _ := p.sc.totals(p.feasible, false)
	p.best = appendBest(p.best[:0], p.feasible, totals)
	return p.best
}

// OmitTies leaves Step.Tied empty in the rollouts the snapshot
// simulates from now on. Naming a step's tied nodes copies up to a
// window of node names a placement, about a tenth of a rollout's
// simulation; plan prints them and the scheduler-agreement checks read
// them, the operator and the admission check never do.
func (s *Snapshot) OmitTies() { s.omitTies = true }

// step is the step of a pod placed at position i by the last search,
// with the nodes tied with it unless the snapshot omits them.
func (p *placer) step(action, pod string, i int) Step {
	st := Step{Action: action, Pod: pod, Node: p.nodeName(i), Sampled: p.sampled}
	if p.e.s.omitTies {
		return st
	}
	if len(p.best) > 1 {
		st.Tied = make([]string, 0, len(p.best)-1)
	}
	for _, j := range p.best {
		if j != i {
			st.Tied = append(st.Tied, p.nodeName(j))
		}
	}
	return st
}

func (p *placer) remove(id podID) { p.e.simulateRemove(id) }

// forget takes pods that are already going away out of the simulation.
func (p *placer) forget(ids []podID) {
	for _, id := range ids {
		p.e.simulateRemove(id)
	}
}

func (p *placer) nodeName(i int) string { return p.e.s.nodes[p.e.order[i]].node.Name }

func (p *placer) nodeID(i int) nodeID { return p.e.order[i] }

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
// (node filters, existing pods' anti-affinity) is shared
// read-only or copied for each evaluation, and is not given.
func (p *placer) release() {
	sp, e := &p.e.s.spares, p.e
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
	e.anti, e.affinity, e.existingAnti, e.existingAntiList, e.spreads = nil, nil, nil, nil, nil
	sp.extras.give(e.extras.at)
	sp.touched.give(p.sc.touched)
	e.extras.at, p.sc.touched = nil, nil
}
