package placement

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// PendingCause is the engine's word on a pod the scheduler left Pending.
type PendingCause struct {
	// Verdict is the engine's answer on the pod as it is.
	Verdict Verdict
	// ByConstraint is true when the pod fits no node as it is and fits one
	// without the entry: the constraint is what keeps it out, and removing
	// it (or adding the capacity it needs) would place the pod.
	ByConstraint bool
}

// WhyPending answers, on the snapshot as it is, whether the entry a
// migration wrote into pod's template is what keeps the pod Pending. A pod
// that fits somewhere, or fits nowhere even without the entry, is Pending
// for another reason (resources, taints, volumes, a scheduler not yet
// done), and the constraint must not be blamed for it.
func (s *Snapshot) WhyPending(pod *corev1.Pod, entry *corev1.PodSpec) (PendingCause, error) {
	with, err := s.Schedule(pod)
	if err != nil {
		return PendingCause{}, fmt.Errorf("schedule pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	cause := PendingCause{Verdict: with}
	if with.Schedulable || entry == nil {
		return cause, nil
	}
	// Without the constraint anywhere: neither in the pod nor in the pods
	// already placed, whose copy of the term forbids their domains to it.
	bare := pod.DeepCopy()
	bare.Spec = *WithoutEntry(&pod.Spec, entry)
	e, err := s.newEvaluatorDisregarding(bare, entry)
	if err != nil {
		return PendingCause{}, fmt.Errorf("schedule pod %s/%s without the constraint: %w", pod.Namespace, pod.Name, err)
	}
	cause.ByConstraint = e.verdict().Schedulable
	return cause, nil
}
