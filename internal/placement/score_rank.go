package placement

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// scorer is the profile's scoring of one pod over the nodes that pass the
// filters, as the scheduler's PreScore, Score and NormalizeScore run it:
// each plugin scores every node, normalizes, and is weighted; the node
// with the highest total wins, a tie going to any of the tied. The parts
// that read other pods follow what a simulation binds and removes.
type scorer struct {
	e *evaluator
	p *Profile

	fit, balanced *resourceScore
	taints        *taintScore
	nodeAffinity  *nodeAffinityScore
	images        *imageScore
	spread        *spreadScore
	interPod      *interPodScore
	volumes       *volumeScore

	// touched are, at each position where the simulation bound or
	// removed a pod, the non-zero requests it added or took, and
	// NodeResourcesFit's and BalancedAllocation's weighted scores
	// together (resourceTotals) once made: a bind or a removal there
	// forgets them. Elsewhere the scores are the snapshot's (kept).
	touched map[int32]touchedNode
	kept    *loadMemo
	// totalsBuf and rawBuf are totals' buffers, reused by the next call
	// when it asks for no detail.
	totalsBuf, rawBuf []int64
	// constant is what the plugins that score every node alike add to
	// each total: they are not run per node.
	constant     int64
	podNonZero   nonZero
	podRequested resources
	// fitRequests are the pod's requests as NodeResourcesFit's score
	// reads them: with the non-zero defaults, and without its pod-level
	// requests or a resize's status, which 1.37's scorer does not read.
	fitRequests resources
}

// newScorer readies the profile's scoring of e's pod; owner is the
// selector of a simulated pod's controller (nil for a pod that names
// its own).
func newScorer(e *evaluator, p *Profile, owner labels.Selector) (*scorer, error) {
	sc := &scorer{e: e, p: p, podRequested: podRequests(e.pod), fitRequests: fitScoreRequests(e.pod)}
	sc.podNonZero.cpu, sc.podNonZero.memory = nonZeroRequests(e.pod)
	var err error
	if p.weight(PluginNodeResourcesFit) > 0 {
		sc.fit = newFitScore(sc, p.Fit)
	}
	if p.weight(PluginBalancedAllocation) > 0 {
		sc.balanced = newBalancedScore(sc, p.Balanced)
	}
	if w := p.weight(PluginTaintToleration); w > 0 {
		if sc.taints = newTaintScore(e); !anyPreferNoSchedule(e) {
			// No node to avoid: every node scores the most.
			sc.taints, sc.constant = nil, sc.constant+w*maxNodeScore
		}
	}
	if p.weight(PluginNodeAffinity) > 0 {
		if sc.nodeAffinity, err = newNodeAffinityScore(e, p.AddedAffinity); err != nil {
			return nil, err
		}
	}
	if p.weight(PluginImageLocality) > 0 {
		// A pod whose images no node holds scores 0 everywhere.
		if sc.images = newImageScore(e); !sc.images.anyHeld() {
			sc.images = nil
		}
	}
	if p.weight(PluginPodTopologySpread) > 0 {
		if sc.spread, err = newSpreadScore(e, p, owner); err != nil {
			return nil, err
		}
	}
	if p.weight(PluginInterPodAffinity) > 0 {
		if sc.interPod, err = newInterPodScore(e, p); err != nil {
			return nil, err
		}
	}
	if p.weight(PluginVolumeBinding) > 0 {
		sc.volumes = newVolumeScore(e, p.VolumeShape)
	}
	e.scoring = sc
	return sc, nil
}

// podRequest is the pod's request of a resource as a resource score
// charges it: with the non-zero defaults unless useRequested.
func (sc *scorer) podRequest(name corev1.ResourceName, useRequested bool) int64 {
	r := sc.fitRequests
	if useRequested {
		r = sc.podRequested
	}
	switch name {
	case corev1.ResourceCPU:
		return r.milliCPU
	case corev1.ResourceMemory:
		return r.memory
	case corev1.ResourceEphemeralStorage:
		return r.ephemeralStorage
	}
	return r.scalar[name]
}

// account follows pod p bound to (1) or removed from (-1) position i.
func (sc *scorer) account(p *corev1.Pod, terminating bool, i int, delta int32) {
	cpu, memory := nonZeroRequests(p)
	if sc.touched == nil {
		sc.touched = make(map[int32]touchedNode, touchedHint)
	}
	t := sc.touched[int32(i)]
	t.cpu += int64(delta) * cpu
	t.memory += int64(delta) * memory
	t.scored = false
	sc.touched[int32(i)] = t
	if sc.spread != nil {
		sc.spread.account(p, terminating, i, delta)
	}
	if sc.interPod != nil {
		sc.interPod.account(p, i, delta)
	}
}

// NodeScore is a node's total score and each plugin's share of it.
type NodeScore struct {
	Node  string
	Total int64
	// Plugins are the weighted, normalized scores by plugin.
	Plugins map[string]int64
}

// totals scores the nodes at positions, which pass the filters, and
// returns their totals in the same order; with detail, each plugin's
// share as well. Without detail the totals are the scorer's buffer,
// good until its next call.
func (sc *scorer) totals(positions []int, detail bool) ([]int64, []map[string]int64) {
	n := len(positions)
	var totals, raw []int64
	var shares []map[string]int64
	if detail {
		totals, raw = make([]int64, n), make([]int64, n)
		shares = make([]map[string]int64, n)
		for k := range shares {
			shares[k] = map[string]int64{}
		}
	} else {
		sc.totalsBuf, sc.rawBuf = slices.Grow(sc.totalsBuf[:0], n)[:n], slices.Grow(sc.rawBuf[:0], n)[:n]
		totals, raw = sc.totalsBuf, sc.rawBuf
	}
	for k := range totals {
		totals[k] = sc.constant
	}
	add := func(plugin string) {
		w := sc.p.weight(plugin)
		for k := range raw {
			totals[k] += raw[k] * w
			if detail {
				shares[k][plugin] = raw[k] * w
			}
		}
	}
	perNode := func(score func(int) int64) {
		for k, i := range positions {
			raw[k] = score(i)
		}
	}
	// Both over cpu and memory alone (the default profile): one pass.
	onePass := !detail && sc.fit != nil && sc.balanced != nil && sc.fit.cpuMemoryOnly() && sc.balanced.cpuMemoryOnly()
	switch {
	case onePass:
		sc.resourceTotals(positions, totals)
	case sc.fit != nil:
		perNode(sc.fit.score)
		add(PluginNodeResourcesFit)
	}
	if sc.balanced != nil && !onePass {
		perNode(sc.balanced.score)
		add(PluginBalancedAllocation)
	}
	if sc.taints != nil {
		perNode(sc.taints.score)
		normalizeToMax(raw, true)
		add(PluginTaintToleration)
	}
	if sc.nodeAffinity != nil {
		perNode(sc.nodeAffinity.score)
		normalizeToMax(raw, false)
		add(PluginNodeAffinity)
	}
	if sc.images != nil {
		perNode(sc.images.score)
		add(PluginImageLocality)
	}
	if sc.spread != nil {
		ignored := make([]bool, n)
		sc.spread.scores(positions, raw, ignored)
		sc.spread.normalize(raw, ignored)
		add(PluginPodTopologySpread)
	}
	if sc.volumes != nil && (detail || sc.volumes.scores()) {
		perNode(sc.volumes.score)
		add(PluginVolumeBinding)
	}
	if sc.interPod != nil && (detail || sc.interPod.scoresAny()) {
		perNode(sc.interPod.score)
		normalizeMinMax(raw)
		add(PluginInterPodAffinity)
	}
	return totals, shares
}

// normalizeToMax scales scores so that the highest is 100 (reverse: so
// that the highest is 0 and none is 100); all zero stays zero (reverse:
// all 100).
func normalizeToMax(scores []int64, reverse bool) {
	var most int64
	for _, s := range scores {
		most = max(most, s)
	}
	for k, s := range scores {
		switch {
		case most == 0 && reverse:
			scores[k] = maxNodeScore
		case most == 0:
		case reverse:
			scores[k] = maxNodeScore - maxNodeScore*s/most
		default:
			scores[k] = maxNodeScore * s / most
		}
	}
}

// best are the positions among positions with the highest total, in
// their order: the scheduler picks one of them at random.
func best(positions []int, totals []int64) []int {
	return appendBest(nil, positions, totals)
}

// appendBest appends best(positions, totals) to out.
func appendBest(out, positions []int, totals []int64) []int {
	if len(positions) == 0 {
		return out
	}
	top := slices.Max(totals)
	for k, i := range positions {
		if totals[k] == top {
			out = append(out, i)
		}
	}
	return out
}
