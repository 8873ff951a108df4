package placement

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// The score plugins that read only the node and the pod: what a
// simulation binds or removes never changes them.

// taintScore is TaintToleration's score: the node's PreferNoSchedule
// taints the pod does not tolerate, fewer is better.
type taintScore struct {
	e           *evaluator
	tolerations []corev1.Toleration
}

func newTaintScore(e *evaluator) *taintScore {
	t := &taintScore{e: e}
	for _, tol := range e.pod.Spec.Tolerations {
		if tol.Effect == "" || tol.Effect == corev1.TaintEffectPreferNoSchedule {
			t.tolerations = append(t.tolerations, tol)
		}
	}
	return t
}

// anyPreferNoSchedule reports whether an evaluated node carries a
// PreferNoSchedule taint.
func anyPreferNoSchedule(e *evaluator) bool {
	if e.altered == nil {
		return e.s.anyPreferNoSchedule()
	}
	return preferNoScheduleOn(e.order, e.node)
}

// anyPreferNoSchedule is whether a live node carries a PreferNoSchedule
// taint, kept until a node's taints change: every scorer asks it, and
// the answer reads every node object.
func (s *Snapshot) anyPreferNoSchedule() bool {
	if s.preferNoSchedule == nil {
		some := preferNoScheduleOn(s.liveNodes(), func(id nodeID) *corev1.Node { return s.nodes[id].node })
		s.preferNoSchedule = &some
	}
	return *s.preferNoSchedule
}

func preferNoScheduleOn(order []nodeID, node func(nodeID) *corev1.Node) bool {
	for _, id := range order {
		for _, t := range node(id).Spec.Taints {
			if t.Effect == corev1.TaintEffectPreferNoSchedule {
				return true
			}
		}
	}
	return false
}

func (t *taintScore) score(i int) int64 {
	var n int64
	taints := t.e.node(t.e.order[i]).Spec.Taints
	for k := range taints {
		if taints[k].Effect == corev1.TaintEffectPreferNoSchedule && !corev1helpers.TolerationsTolerateTaint(klog.Background(), t.tolerations, &taints[k], false) {
			n++
		}
	}
	return n
}

// nodeAffinityScore is NodeAffinity's score: the weights of the pod's
// preferred node terms (and the profile's added ones) the node meets.
type nodeAffinityScore struct {
	e            *evaluator
	pod, profile *nodeaffinity.PreferredSchedulingTerms
}

// newNodeAffinityScore is nil when neither the pod nor the profile prefers
// any node: the plugin skips it.
func newNodeAffinityScore(e *evaluator, added *corev1.NodeAffinity) (*nodeAffinityScore, error) {
	a := &nodeAffinityScore{e: e}
	if aff := e.pod.Spec.Affinity; aff != nil && aff.NodeAffinity != nil && len(aff.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
		terms, err := nodeaffinity.NewPreferredSchedulingTerms(aff.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
		if err != nil {
			return nil, fmt.Errorf("preferred node affinity: %w", err)
		}
		a.pod = terms
	}
	if added != nil && len(added.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
		terms, err := nodeaffinity.NewPreferredSchedulingTerms(added.PreferredDuringSchedulingIgnoredDuringExecution)
		if err != nil {
			return nil, fmt.Errorf("the profile's added affinity: %w", err)
		}
		a.profile = terms
	}
	if a.pod == nil && a.profile == nil {
		return nil, nil
	}
	return a, nil
}

func (a *nodeAffinityScore) score(i int) int64 {
	node := a.e.node(a.e.order[i])
	var n int64
	if a.profile != nil {
		n += a.profile.Score(node)
	}
	if a.pod != nil {
		n += a.pod.Score(node)
	}
	return n
}

// imageScore is ImageLocality's score: the sizes of the pod's images the
// node holds, each scaled by the share of nodes that hold it, clamped
// between 23 MiB and 1000 MiB per image, as 0 to 100.
type imageScore struct {
	e      *evaluator
	index  *imageIndex
	images []string
}

func newImageScore(e *evaluator) *imageScore {
	spec := &e.pod.Spec
	im := &imageScore{e: e, index: e.s.imagesIndex()}
	for _, c := range spec.InitContainers {
		im.images = append(im.images, normalizedImageName(c.Image))
	}
	for _, c := range spec.Containers {
		im.images = append(im.images, normalizedImageName(c.Image))
	}
	for _, v := range spec.Volumes {
		if v.Image != nil {
			im.images = append(im.images, normalizedImageName(v.Image.Reference))
		}
	}
	return im
}

// anyHeld reports whether a node holds one of the pod's images.
func (im *imageScore) anyHeld() bool {
	for _, name := range im.images {
		if im.index.onNodes[name] > 0 {
			return true
		}
	}
	return false
}

func (im *imageScore) score(i int) int64 {
	const (
		mb                    int64 = 1024 * 1024
		minThreshold                = 23 * mb
		maxContainerThreshold       = 1000 * mb
	)
	var sum int64
	if sizes := im.index.byNode[im.e.order[i]]; sizes != nil {
		for _, name := range im.images {
			if size, ok := sizes[name]; ok {
				spread := float64(im.index.onNodes[name]) / float64(im.index.nodes)
				sum += int64(float64(size) * spread)
			}
		}
	}
	maxThreshold := maxContainerThreshold * int64(len(im.images))
	// In the scheduler's order: a pod without images scores 0.
	if sum < minThreshold {
		sum = minThreshold
	} else if sum > maxThreshold {
		sum = maxThreshold
	}
	return maxNodeScore * (sum - minThreshold) / (maxThreshold - minThreshold)
}
