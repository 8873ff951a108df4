package placement

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// GatedMessage is the PodScheduled condition's message of a pod with
// scheduling gates, word for word.
const GatedMessage = "Scheduling is blocked due to non-empty scheduling gates"

// Verdict is the engine's answer for one pod.
type Verdict struct {
	// Schedulable is true when at least one node passes every filter.
	Schedulable bool
	// Nodes are the nodes that pass every filter, by name.
	Nodes []string
	// Reasons counts the nodes rejected per reason.
	Reasons map[string]int
	// Message is the scheduler's FailedScheduling message when the pod is
	// not schedulable, e.g. "0/2 nodes are available: 2 node(s) didn't
	// match pod anti-affinity rules."
	Message string
}

// verdict evaluates every node.
func (e *evaluator) verdict() Verdict {
	v := Verdict{Reasons: map[string]int{}}
	total := e.s.NodeCount()
	if e.gated {
		// The scheduler leaves a gated pod in its queue: no FailedScheduling
		// event, only the pod's PodScheduled condition says why.
		v.Message = GatedMessage
		return v
	}
	if e.preFilterMsg != "" {
		v.Message = fmt.Sprintf("0/%d nodes are available: %s.", total, e.preFilterMsg)
		return v
	}
	for i, id := range e.order {
		rs := e.reasons(i)
		if rs == nil {
			v.Nodes = append(v.Nodes, e.s.nodes[id].node.Name)
			continue
		}
		for _, r := range rs {
			v.Reasons[r]++
		}
	}
	v.Schedulable = len(v.Nodes) > 0
	if !v.Schedulable {
		v.Message = fitErrorMessage(total, v.Reasons)
	}
	return v
}

// fitErrorMessage formats reasons as the scheduler's FitError does: counts
// and reasons sorted as strings.
func fitErrorMessage(total int, reasons map[string]int) string {
	parts := make([]string, 0, len(reasons))
	for r, n := range reasons {
		parts = append(parts, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(parts)
	msg := fmt.Sprintf("0/%d nodes are available", total)
	if len(parts) == 0 {
		return msg + "."
	}
	return msg + ": " + strings.Join(parts, ", ") + "."
}

// Schedule answers where the pod may go in the snapshot as it is.
func (s *Snapshot) Schedule(pod *corev1.Pod) (Verdict, error) {
	e, err := s.newEvaluator(pod)
	if err != nil {
		return Verdict{}, err
	}
	return e.verdict(), nil
}
