package placement

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The pods the engine tells apart from the workloads' own, and the marks it
// reads on a pod: a capacity request's placeholders, the pods a simulation
// makes up, and the annotations that rank a pod for deletion or keep it
// where it is.

// PlaceholderImage is the container image of placeholder pods: it runs
// nothing, and any real pod preempts it.
const PlaceholderImage = "registry.k8s.io/pause:3.10"

// PlaceholderLabel marks the placeholder pods of a capacity request; its
// value is the requesting migration's uid.
const PlaceholderLabel = "placementguard.io/capacity-request"

// IsPlaceholder reports whether p is a placeholder pod: it carries the
// placeholder label and a negative priority, so every real pod preempts
// it, and it counts for nothing where real pods are placed.
func IsPlaceholder(p *corev1.Pod) bool {
	_, ok := p.Labels[PlaceholderLabel]
	return ok && p.Spec.Priority != nil && *p.Spec.Priority < 0
}

// simulatedUIDPrefix starts the UID of every pod a simulation makes up.
const simulatedUIDPrefix = "simulated/"

// isSimulated reports whether a pod is one a simulation made up, not one
// of the cluster's.
func isSimulated(pod *corev1.Pod) bool {
	return strings.HasPrefix(string(pod.UID), simulatedUIDPrefix)
}

// The annotations other tools put on a pod to keep it where it is; a pod
// that carries one is never moved.
const (
	safeToEvictAnnotation      = "cluster-autoscaler.kubernetes.io/safe-to-evict"
	doNotDisruptAnnotation     = "karpenter.sh/do-not-disrupt"
	preferNoEvictionAnnotation = "descheduler.alpha.kubernetes.io/prefer-no-eviction"
)

// KeptAnnotations are the pod annotations the engine reads: the deletion
// cost, its mark, and those that keep a pod from being moved. Whatever
// strips pods before the engine sees them must keep these.
var KeptAnnotations = []string{corev1.PodDeletionCost, DeletionCostMark, safeToEvictAnnotation, doNotDisruptAnnotation, preferNoEvictionAnnotation}

// DeletionCostMark records on a pod the pod-deletion-cost placement-guard
// wrote there. A cost that does not equal its mark was written by someone
// else, whose ranking placement-guard leaves alone.
const DeletionCostMark = "placementguard.io/deletion-cost"
