package placement

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// nodeMatcher answers what component-helpers' RequiredNodeAffinity.Match
// answers for a pod (its nodeSelector and required node affinity) without
// what makes that cost: a map of the node's fields made on every call, and
// a linear search of an In or NotIn list. The engine asks it for every
// node of the cluster, once per evaluation, and a selector of a hundred
// host names is common. What it does not compile (a term with matchFields,
// an expression that does not parse) it leaves to component-helpers,
// which also decides what a malformed selector matches.
type nodeMatcher struct {
	selector map[string]string
	// terms are the required affinity's non-empty terms, any of which must
	// match; nil with affinity false is no required affinity.
	terms    [][]labelRequirement
	affinity bool
	fallback *nodeaffinity.RequiredNodeAffinity
}

// labelRequirement is one matchExpressions entry, compiled.
type labelRequirement struct {
	key    string
	op     corev1.NodeSelectorOperator
	values map[string]struct{}
	bound  int64
}

func newNodeMatcher(pod *corev1.Pod) nodeMatcher {
	m := nodeMatcher{selector: pod.Spec.NodeSelector}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return m
	}
	m.affinity = true
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
			continue // selects nothing, as component-helpers skips it
		}
		reqs, ok := compileTerm(term)
		if !ok {
			fallback := nodeaffinity.GetRequiredNodeAffinity(pod)
			return nodeMatcher{fallback: &fallback}
		}
		m.terms = append(m.terms, reqs)
	}
	return m
}

// compileTerm compiles a term of matchExpressions alone that parses as
// component-helpers parses it.
func compileTerm(term corev1.NodeSelectorTerm) ([]labelRequirement, bool) {
	if len(term.MatchFields) > 0 {
		return nil, false
	}
	ops := map[corev1.NodeSelectorOperator]selection.Operator{
		corev1.NodeSelectorOpIn: selection.In, corev1.NodeSelectorOpNotIn: selection.NotIn,
		corev1.NodeSelectorOpExists: selection.Exists, corev1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
		corev1.NodeSelectorOpGt: selection.GreaterThan, corev1.NodeSelectorOpLt: selection.LessThan,
	}
	out := make([]labelRequirement, 0, len(term.MatchExpressions))
	for _, expr := range term.MatchExpressions {
		op, known := ops[expr.Operator]
		if !known {
			return nil, false
		}
		// The same validation component-helpers runs; a term it refuses
		// is left to it.
		if _, err := labels.NewRequirement(expr.Key, op, expr.Values); err != nil {
			return nil, false
		}
		r := labelRequirement{key: expr.Key, op: expr.Operator}
		switch expr.Operator {
		case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
			r.values = make(map[string]struct{}, len(expr.Values))
			for _, v := range expr.Values {
				r.values[v] = struct{}{}
			}
		case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
			bound, err := strconv.ParseInt(expr.Values[0], 10, 64)
			if err != nil {
				return nil, false
			}
			r.bound = bound
		}
		out = append(out, r)
	}
	return out, true
}

// Match reports whether the node passes the pod's nodeSelector and
// required node affinity.
func (m nodeMatcher) Match(node *corev1.Node) bool {
	if m.fallback != nil {
		ok, _ := m.fallback.Match(node)
		return ok
	}
	for k, v := range m.selector {
		if got, ok := node.Labels[k]; !ok || got != v {
			return false
		}
	}
	if !m.affinity {
		return true
	}
	for _, term := range m.terms {
		if requirementsMatch(term, node.Labels) {
			return true
		}
	}
	return false
}

func requirementsMatch(term []labelRequirement, nodeLabels map[string]string) bool {
	for _, r := range term {
		value, has := nodeLabels[r.key]
		var ok bool
		switch r.op {
		case corev1.NodeSelectorOpIn:
			_, in := r.values[value]
			ok = has && in
		case corev1.NodeSelectorOpNotIn:
			_, in := r.values[value]
			ok = !has || !in
		case corev1.NodeSelectorOpExists:
			ok = has
		case corev1.NodeSelectorOpDoesNotExist:
			ok = !has
		case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
			n, err := strconv.ParseInt(value, 10, 64)
			ok = has && err == nil && (r.op == corev1.NodeSelectorOpGt && n > r.bound || r.op == corev1.NodeSelectorOpLt && n < r.bound)
		}
		if !ok {
			return false
		}
	}
	return true
}
