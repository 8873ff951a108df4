package placement

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// evaluator answers "where may this pod go" for one pod spec, over and over,
// while a simulation binds and removes pods. Everything that depends only on
// the pod and the nodes is computed once; everything that depends on other
// pods is kept as counts per topology domain and updated incrementally.
type evaluator struct {
	s   *Snapshot
	pod *corev1.Pod
	// profile is the scheduler profile the pod names (Profiles.Of).
	profile  *Profile
	nsLabels labels.Set

	// order are the evaluated nodes in name order; posOf maps a nodeID to
	// its position in order, -1 for none.
	order []nodeID
	posOf []int32

	req          resources
	preFilterMsg string
	// gated is a pod with scheduling gates, which the scheduler does not
	// try to place at all.
	gated bool
	// hostPorts are the ports the pod binds on its node; usedPorts counts,
	// per position, those held there (nil when the pod binds none).
	hostPorts []hostPort
	usedPorts []map[hostPort]int32
	// rwopUsers counts the pods on nodes using each of the pod's
	// ReadWriteOncePod claims (nil when it has none).
	rwopUsers map[types.NamespacedName]int32
	// volumeLimits is NodeVolumeLimits' state (nil when the pod attaches no
	// CSI volume).
	volumeLimits *volumeLimits
	// disks are the pod's inline in-tree disks and diskHolders counts, per
	// position, the pods there that hold one of them (nil without disks).
	disks       []*corev1.Volume
	diskHolders []int32
	// nodeReason and volumeReason are the reasons of the filters that do
	// not depend on other pods, per position; "" passes. nodeReason is the
	// snapshot's filters', shared.
	filters      *nodeFilters
	nodeReason   []reasonCode
	volumeReason []reasonCode
	// volumes are the pod's volumes as VolumeBinding's PreFilter found
	// them.
	volumes podVolumes
	// volumeAlso is VolumeBinding's second reason for a node, when both
	// a bound and an unbound claim fail there.
	volumeAlso []reasonCode
	// volumeShared: no volume gives any node a reason, and volumeReason
	// and volumeAlso are the filters' shared zeros, copied on the first
	// reason. Most pods have no volume a node can fail: an evaluation then
	// allocates no array of reasons, nor of candidates.
	volumeShared bool
	// reasonText is the text of each reason code, "" for code 0 (passes),
	// and reasonCodes the code of each text: the static filters give a
	// handful of distinct reasons, kept as two bytes per node and filter
	// rather than a string header each.
	reasonText  []string
	reasonCodes map[string]reasonCode
	affinityOK  []bool

	// extras are the pods a simulation added to or removed from each
	// node, on top of the snapshot.
	extras nodeExtras

	anti, affinity []termCounts
	affinityTotal  int
	selfAffinity   bool
	// existingAnti counts, per topology key, the existing pods whose
	// required anti-affinity selects the incoming pod; existingAntiList
	// holds the same counts for iteration on the hot path.
	existingAnti     map[string]*domainCounts
	existingAntiList []*domainCounts
	spreads          []*spreadState
	// candidates are the positions that pass the filters no simulation can
	// change (node, taints, affinity, volumes), and candidatesSet counts
	// the times they were set: a StatefulSet's pods differ in their claims,
	// and each one's volumes set them again.
	candidates    []int
	candidatesSet int
	// ownCandidates is the evaluation's own buffer of candidates, used
	// once a volume gives a node a reason.
	ownCandidates []int
	// disregarded is an entry whose required anti-affinity terms existing
	// pods' are evaluated without: the cluster as it would be had no pod
	// carried it (nil for the cluster as it is).
	disregarded *corev1.PodSpec
	// altered are nodes as a simulated disruption leaves them (cordoned,
	// unreachable), in place of the snapshot's.
	altered map[nodeID]*corev1.Node
	// skipResources: the profile turns NodeResourcesFit's filter off.
	skipResources bool
	// fitOK caches, per position, the verdict of every check of
	// nodeFits but the spreads' (the node's static filters, inter-pod
	// affinity, and what reads only what is bound to the node): 0 not
	// known yet, 1 passes, 2 fails. A placement asks them of hundreds of
	// nodes, and a rollout's next placement of the same nodes again,
	// while a bind or a removal changes one node's: that node's entry is
	// forgotten; every entry when an inter-pod count over a domain of
	// several nodes changes, and when the pod's volumes do. The spreads'
	// verdicts are kept per domain (spreadState.verdict).
	fitOK []uint8
	// scoring follows what a simulation binds and removes, for the layer
	// that scores the nodes the filters pass (nil when nothing scores).
	scoring accountant
}

// accountant follows the pods a simulation binds (delta 1) and removes
// (-1) at a position.
type accountant interface {
	account(p *corev1.Pod, terminating bool, i int, delta int32)
}

// evalOptions are the hypotheses an evaluator works under.
type evalOptions struct {
	disregard *corev1.PodSpec
	altered   map[nodeID]*corev1.Node
}

// node is the node with ID id as the evaluation sees it.
func (e *evaluator) node(id nodeID) *corev1.Node {
	if n, ok := e.altered[id]; ok {
		return n
	}
	return e.s.nodes[id].node
}

// termCounts counts, per domain, the pods an incoming pod's term selects.
type termCounts struct {
	term affinityTerm
	domainCounts
}

func (s *Snapshot) newEvaluator(pod *corev1.Pod) (*evaluator, error) {
	return s.newEvaluatorWith(pod, evalOptions{})
}

// newEvaluatorDisregarding evaluates pod as if no existing pod carried the
// required anti-affinity terms of entry.
func (s *Snapshot) newEvaluatorDisregarding(pod *corev1.Pod, entry *corev1.PodSpec) (*evaluator, error) {
	return s.newEvaluatorWith(pod, evalOptions{disregard: entry})
}

func (s *Snapshot) newEvaluatorWith(pod *corev1.Pod, opts evalOptions) (*evaluator, error) {
	if s.interrupted() {
		return nil, ErrInterrupted
	}
	e := &evaluator{
		s:           s,
		pod:         pod,
		profile:     s.profileOf(pod),
		nsLabels:    namespaceLabels(s, pod.Namespace),
		order:       s.liveNodes(),
		posOf:       s.livePositions(),
		req:         podRequests(pod),
		disregarded: opts.disregard,
		altered:     opts.altered,
	}
	n := len(e.order)
	e.extras = newNodeExtras(n)

	// PreFilters in the scheduler's order: NodeAffinity, then VolumeBinding.
	filters := s.nodeFiltersOf(pod, e.profile, opts.altered)
	vols, pre := s.volumePreFilter(pod)
	if !e.profile.filters(FilterVolumeBinding) {
		pre = ""
	}
	e.volumes = vols
	if filters.conflict {
		pre = reasonNodeAffinityConflict
	}
	e.preFilterMsg = pre
	e.filters, e.nodeReason, e.affinityOK = filters, filters.reason, filters.affinityOK
	// The evaluation's codes begin with the node filters'; VolumeBinding's
	// reasons are added after them.
	e.reasonText = slices.Clone(filters.text)
	e.reasonCodes = make(map[string]reasonCode, len(e.reasonText))
	for c, text := range e.reasonText[1:] {
		e.reasonCodes[text] = reasonCode(c + 1)
	}
	e.shareNoVolumeReasons()
	if pre == "" && !vols.none() {
		for i, id := range e.order {
			reason, also := volumeFilter(e.profile, vols, e.node(id))
			e.setVolumeReasons(i, reason, also)
		}
	}
	p := e.profile
	e.gated = len(pod.Spec.SchedulingGates) > 0 && p.filters(FilterSchedulingGates)
	e.skipResources = !p.filters(FilterNodeResourcesFit)
	if p.filters(FilterNodePorts) {
		e.initPorts()
	}
	if p.filters(FilterVolumeRestrictions) {
		e.initDiskConflicts()
		e.initReadWriteOncePod()
	}
	if p.filters(FilterNodeVolumeLimits) {
		e.initVolumeLimits()
	}
	e.resetCandidates()
	if p.filters(FilterInterPodAffinity) {
		if err := e.initInterPod(); err != nil {
			return nil, err
		}
	}
	if p.filters(FilterPodTopologySpread) {
		if err := e.initSpreads(); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// newSpreadEvaluator is an evaluator of pod's hard spreads alone: which
// nodes and domains each counts, and the pods it counts there. It
// answers nothing else; a question that reads only where a spread stands
// (endStateOf) asks it instead of a whole evaluation.
func (s *Snapshot) newSpreadEvaluator(pod *corev1.Pod) (*evaluator, error) {
	if s.interrupted() {
		return nil, ErrInterrupted
	}
	e := &evaluator{s: s, pod: pod, profile: s.profileOf(pod), order: s.liveNodes(), posOf: s.livePositions()}
	e.filters = s.nodeFiltersOf(pod, e.profile, nil)
	e.affinityOK = e.filters.affinityOK
	return e, e.initSpreads()
}

// code is the code of a reason, 0 for none.
func (e *evaluator) code(reason string) reasonCode {
	if reason == "" {
		return 0
	}
	if c, ok := e.reasonCodes[reason]; ok {
		return c
	}
	if e.reasonCodes == nil {
		e.reasonText, e.reasonCodes = []string{""}, map[string]reasonCode{}
	}
	c := reasonCode(len(e.reasonText))
	e.reasonText = append(e.reasonText, reason)
	e.reasonCodes[reason] = c
	return c
}

// shareNoVolumeReasons leaves every node without a volume reason, in the
// filters' shared zeros.
func (e *evaluator) shareNoVolumeReasons() {
	e.volumeReason, e.volumeAlso = e.filters.zeros(), e.filters.zeros()
	e.volumeShared = true
}

// setVolumeReasons records VolumeBinding's reasons for the node at
// position i.
func (e *evaluator) setVolumeReasons(i int, reason, also string) {
	r, a := e.code(reason), e.code(also)
	if e.volumeShared {
		if r == 0 && a == 0 {
			return
		}
		n := len(e.order)
		e.volumeReason, e.volumeAlso = make([]reasonCode, n), make([]reasonCode, n)
		e.volumeShared = false
	}
	e.volumeReason[i], e.volumeAlso[i] = r, a
}

// resetCandidates finds the positions the static filters pass: the node
// filters' own when no volume gives a node a reason.
func (e *evaluator) resetCandidates() {
	e.candidatesSet++
	clear(e.fitOK)
	switch {
	case e.preFilterMsg != "" || e.gated:
		e.candidates = nil
	case e.volumeShared:
		e.candidates = e.filters.passing()
	default:
		if e.ownCandidates == nil {
			e.ownCandidates = make([]int, 0, len(e.order))
		}
		e.ownCandidates = e.ownCandidates[:0]
		for i := range e.order {
			if e.nodeReason[i] == 0 && e.volumeReason[i] == 0 {
				e.ownCandidates = append(e.ownCandidates, i)
			}
		}
		e.candidates = e.ownCandidates
	}
}

// bound reports the evaluated position of the node a snapshot pod is bound
// to, or -1.
func (e *evaluator) boundPos(pi *podInfo) int {
	if pi.node == noNode || int(pi.node) >= len(e.posOf) {
		return -1
	}
	return int(e.posOf[pi.node])
}

// reasons returns why the pod cannot go to the node at position i, in the
// scheduler's filter order, stopping at the first filter that fails as the
// scheduler does; nil when it can. A verdict asks it of every node, most
// of them kept out by a static filter: those answers are shared, and
// callers must not change them.
func (e *evaluator) reasons(i int) []string {
	if r := e.nodeReason[i]; r != 0 {
		return e.reasonOf(r)
	}
	if !e.portsFree(i) {
		return []string{ReasonNodePorts}
	}
	ni := e.s.nodes[e.order[i]]
	extraReq, extraPods := e.extras.get(i)
	if r := insufficient(e.req, ni.requested.plus(extraReq), ni.allocatable, ni.allowedPods, ni.podCount+int64(extraPods)); len(r) > 0 && !e.skipResources {
		return r
	}
	if e.diskConflict(i) {
		return []string{ReasonDiskConflict}
	}
	if e.readWriteOncePodInUse() {
		return []string{ReasonReadWriteOncePod}
	}
	if e.volumeLimitExceeded(i) {
		return []string{ReasonMaxVolumeCount}
	}
	if r := e.volumeReason[i]; r != 0 {
		if also := e.volumeAlso[i]; also != 0 {
			return []string{e.reasonText[r], e.reasonText[also]}
		}
		return e.reasonOf(r)
	}
	if r := e.spreadReason(i); r != "" {
		return []string{r}
	}
	if r := e.interPodReason(i); r != "" {
		return []string{r}
	}
	return nil
}

// reasonOf is the text of code r as a list of one, shared with the
// evaluation's table of texts (its capacity ends at the one element, so
// that an append copies).
func (e *evaluator) reasonOf(r reasonCode) []string {
	return e.reasonText[r : r+1 : r+1]
}

// fits is reasons(i) == nil without allocating.
func (e *evaluator) fits(i int) bool { return e.anyFits() && e.nodeFits(i) }

// anyFits reports whether the checks that do not read a node pass: the
// pod may go to some node at all. A search asks it once, not per node.
func (e *evaluator) anyFits() bool {
	return e.preFilterMsg == "" && !e.gated && !e.readWriteOncePodInUse()
}

// nodeFits is fits for the node at position i once anyFits holds. The
// spreads come first: a search rejects most nodes by their domain, and
// those verdicts are kept per domain.
func (e *evaluator) nodeFits(i int) bool {
	return e.spreadReason(i) == "" && e.fitsBesideSpreads(i)
}

// fitsBesideSpreads is every check of nodeFits but the spreads',
// remembered until what they read changes (fitOK).
func (e *evaluator) fitsBesideSpreads(i int) bool {
	if e.fitOK == nil {
		e.fitOK = make([]uint8, len(e.order))
	}
	switch e.fitOK[i] {
	case 1:
		return true
	case 2:
		return false
	}
	ok := e.nodeReason[i] == 0 && e.volumeReason[i] == 0 && e.interPodReason(i) == "" && e.localFits(i)
	e.fitOK[i] = 2
	if ok {
		e.fitOK[i] = 1
	}
	return ok
}

// forgetFitsOver forgets every remembered verdict when a count over
// topology t changed and t's domains hold several nodes; a count over
// one node's domain changes only that node's, which the bind or the
// removal there forgets.
func (e *evaluator) forgetFitsOver(t *topology) {
	if t.shared {
		clear(e.fitOK)
	}
}

// localFits is the checks of fits that read only the node at position i
// and what is bound to it.
func (e *evaluator) localFits(i int) bool {
	ok := e.portsFree(i) && !e.diskConflict(i) && !e.volumeLimitExceeded(i)
	if ok && !e.skipResources {
		ni := e.s.nodes[e.order[i]]
		extraReq, extraPods := e.extras.get(i)
		ok = ni.podCount+int64(extraPods)+1 <= ni.allowedPods && e.req.fitsIn(ni.allocatable, ni.requested, extraReq)
	}
	return ok
}

// simulateBind accounts for pod p bound to the node at position i. p has the
// evaluated pod's spec when a rollout places a new pod; antiTerms are p's
// required anti-affinity terms.
func (e *evaluator) simulateBind(p *corev1.Pod, antiTerms []affinityTerm, req resources, i int) {
	e.account(p, p.DeletionTimestamp != nil, antiTerms, req, i, 1)
}

// simulateRemove accounts for the snapshot pod going away, as when a
// rollout deletes an old pod.
func (e *evaluator) simulateRemove(id podID) {
	pi := e.s.pods[id]
	if i := e.boundPos(pi); i >= 0 {
		e.account(pi.common(), pi.terminating(), pi.antiTerms(), pi.requests, i, -1)
	}
}

// account adds (delta 1) or takes away (-1) pod p on the node at position
// i; a terminating pod holds its node's resources but spreads do not count
// it.
func (e *evaluator) account(p *corev1.Pod, terminating bool, antiTerms []affinityTerm, req resources, i int, delta int32) {
	if e.fitOK != nil {
		e.fitOK[i] = 0
	}
	e.extras.account(i, req, delta)
	e.accountPorts(p, i, delta)
	e.accountClaims(p, delta)
	e.accountDisks(p, i, delta)
	e.accountVolumeLimits(p, i, delta)
	e.accountInterPod(p, antiTerms, i, delta)
	if !terminating {
		e.accountSpread(p, i, delta)
	}
	if e.scoring != nil {
		e.scoring.account(p, terminating, i, delta)
	}
}

// domainOfNode is the domain of a snapshot node, -1 without the label or
// when the node is not evaluated.
func (e *evaluator) domainOfNode(t *topology, id nodeID) int32 {
	if id == noNode || int(id) >= len(e.posOf) || e.posOf[id] < 0 {
		return -1
	}
	return t.domainOf[e.posOf[id]]
}

// topologyFor returns the interned topology of key, shared by every
// evaluation until a node changes.
func (e *evaluator) topologyFor(key string) *topology { return e.s.topology(key) }

// feasible are the positions of the nodes the pod fits on now, in order.
func (e *evaluator) feasible() []int {
	var out []int
	if !e.anyFits() {
		return nil
	}
	for _, i := range e.candidates {
		if e.nodeFits(i) {
			out = append(out, i)
		}
	}
	return out
}

// nodeName is the name of the node at position i.
func (e *evaluator) nodeName(i int) string { return e.s.nodes[e.order[i]].node.Name }
