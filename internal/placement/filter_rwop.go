package placement

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ReasonReadWriteOncePod is VolumeRestrictions' Filter reason, word for
// word: a ReadWriteOncePod claim already used by a pod on any node keeps
// every other pod that mounts it off every node. kube-scheduler 1.37
// reports it per node, after NodeResourcesFit, rather than from PreFilter.
const ReasonReadWriteOncePod = "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"

// initReadWriteOncePod finds the pod's ReadWriteOncePod claims and counts the
// pods on nodes that use them; only for a pod that has such a claim, so that
// the common pod pays nothing.
func (e *evaluator) initReadWriteOncePod() {
	for _, ref := range podClaims(e.pod) {
		key := ref.NamespacedName
		claim, ok := e.s.claims[key]
		if !ok || !slices.Contains(claim.Spec.AccessModes, corev1.ReadWriteOncePod) {
			continue
		}
		if e.rwopUsers == nil {
			e.rwopUsers = map[types.NamespacedName]int32{}
		}
		e.rwopUsers[key] = 0
	}
	if e.rwopUsers == nil {
		return
	}
	for _, pi := range e.s.pods {
		if pi != nil && pi.node != noNode {
			e.accountClaims(pi.common(), 1)
		}
	}
}

// accountClaims counts p's use of the watched claims as it lands on (delta
// 1) or leaves (-1) a node.
func (e *evaluator) accountClaims(p *corev1.Pod, delta int32) {
	if e.rwopUsers == nil {
		return
	}
	for _, ref := range podClaims(p) {
		key := ref.NamespacedName
		if _, watched := e.rwopUsers[key]; watched {
			e.rwopUsers[key] += delta
		}
	}
}

// readWriteOncePodInUse is VolumeRestrictions' ReadWriteOncePod check,
// the same on every node: true when another pod on a node uses one of the
// pod's ReadWriteOncePod claims.
func (e *evaluator) readWriteOncePodInUse() bool {
	if len(e.rwopUsers) == 0 {
		return false
	}
	for _, n := range e.rwopUsers {
		if n > 0 {
			return true
		}
	}
	return false
}
