package placement

import (
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// equalTerm and equalSpread compare a term or a constraint a, which may be
// a pod's, with b as written. An empty list and a missing one are the same,
// and a pod's copy, stored by the API server, has its matchLabelKeys and
// mismatchLabelKeys merged into its label selector, which the template's
// copy has not.
func equalTerm(a, b corev1.PodAffinityTerm) bool {
	return a.TopologyKey == b.TopologyKey &&
		equalAsWritten(a.LabelSelector, b.LabelSelector, a.MatchLabelKeys, a.MismatchLabelKeys) &&
		equalSelector(a.NamespaceSelector, b.NamespaceSelector) &&
		slices.Equal(a.Namespaces, b.Namespaces) &&
		slices.Equal(a.MatchLabelKeys, b.MatchLabelKeys) &&
		slices.Equal(a.MismatchLabelKeys, b.MismatchLabelKeys)
}

func equalSpread(a, b corev1.TopologySpreadConstraint) bool {
	return a.TopologyKey == b.TopologyKey && a.MaxSkew == b.MaxSkew && a.WhenUnsatisfiable == b.WhenUnsatisfiable &&
		equalAsWritten(a.LabelSelector, b.LabelSelector, a.MatchLabelKeys, nil) && slices.Equal(a.MatchLabelKeys, b.MatchLabelKeys) &&
		reflect.DeepEqual(a.MinDomains, b.MinDomains) &&
		policyOr(a.NodeAffinityPolicy, corev1.NodeInclusionPolicyHonor) == policyOr(b.NodeAffinityPolicy, corev1.NodeInclusionPolicyHonor) &&
		policyOr(a.NodeTaintsPolicy, corev1.NodeInclusionPolicyIgnore) == policyOr(b.NodeTaintsPolicy, corev1.NodeInclusionPolicyIgnore)
}

func policyOr(p *corev1.NodeInclusionPolicy, def corev1.NodeInclusionPolicy) corev1.NodeInclusionPolicy {
	if p == nil {
		return def
	}
	return *p
}

// equalAsWritten compares the selector a of a term, which may have been
// admitted, with b as written: the API server appends, for each of
// matchKeys then mismatchKeys the pod has a label for, a requirement key In
// (or NotIn) the pod's value.
func equalAsWritten(a, b *metav1.LabelSelector, matchKeys, mismatchKeys []string) bool {
	if equalSelector(a, b) {
		return true
	}
	if len(matchKeys) == 0 && len(mismatchKeys) == 0 {
		return false
	}
	return equalSelector(withoutAdmitted(a, matchKeys, mismatchKeys), b)
}

// withoutAdmitted is sel without the requirements admission appended to it
// for matchKeys and mismatchKeys, found at its end.
func withoutAdmitted(sel *metav1.LabelSelector, matchKeys, mismatchKeys []string) *metav1.LabelSelector {
	if sel == nil {
		return nil
	}
	exprs := sel.MatchExpressions
	for n := len(exprs); n > 0; n = len(exprs) {
		last := exprs[n-1]
		merged := len(last.Values) == 1 &&
			(last.Operator == metav1.LabelSelectorOpIn && slices.Contains(matchKeys, last.Key) ||
				last.Operator == metav1.LabelSelectorOpNotIn && slices.Contains(mismatchKeys, last.Key))
		if !merged {
			break
		}
		exprs = exprs[:n-1]
	}
	out := *sel
	out.MatchExpressions = exprs
	if len(exprs) == 0 {
		out.MatchExpressions = nil
	}
	return &out
}

func equalSelector(a, b *metav1.LabelSelector) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if len(a.MatchLabels) != len(b.MatchLabels) || len(a.MatchExpressions) != len(b.MatchExpressions) {
		return false
	}
	for k, v := range a.MatchLabels {
		if w, ok := b.MatchLabels[k]; !ok || w != v {
			return false
		}
	}
	for i := range a.MatchExpressions {
		x, y := a.MatchExpressions[i], b.MatchExpressions[i]
		if x.Key != y.Key || x.Operator != y.Operator || !slices.Equal(x.Values, y.Values) {
			return false
		}
	}
	return true
}
