package placement

import (
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// The compiled matcher answers as component-helpers does, for every shape
// of selector: valid and malformed expressions of every operator, empty
// terms, matchFields, nodeSelector, and nodes with and without the labels.
func TestNodeMatcherAnswersAsComponentHelpers(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	keys := []string{"zone", "role", "size", "bad key!"}
	values := []string{"a", "b", "c", "1", "5", "10", "-3", "", "x y"}
	ops := []corev1.NodeSelectorOperator{corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists,
		corev1.NodeSelectorOpDoesNotExist, corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, "Near"}
	pick := func(from []string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = from[rng.IntN(len(from))]
		}
		return out
	}
	randomTerm := func() corev1.NodeSelectorTerm {
		var term corev1.NodeSelectorTerm
		for range rng.IntN(3) {
			term.MatchExpressions = append(term.MatchExpressions, corev1.NodeSelectorRequirement{
				Key: keys[rng.IntN(len(keys))], Operator: ops[rng.IntN(len(ops))], Values: pick(values, rng.IntN(3))})
		}
		if rng.IntN(6) == 0 {
			term.MatchFields = []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}}
		}
		return term
	}
	var nodes []*corev1.Node
	for i := range 40 {
		labels := map[string]string{}
		for _, k := range keys[:3] {
			if rng.IntN(3) > 0 {
				labels[k] = values[rng.IntN(len(values)-2)]
			}
		}
		nodes = append(nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i), Labels: labels}})
	}
	compiled := 0
	for i := range 3000 {
		pod := &corev1.Pod{}
		if rng.IntN(3) == 0 {
			pod.Spec.NodeSelector = map[string]string{keys[rng.IntN(3)]: values[rng.IntN(3)]}
		}
		if rng.IntN(5) > 0 {
			sel := &corev1.NodeSelector{}
			for range rng.IntN(3) {
				sel.NodeSelectorTerms = append(sel.NodeSelectorTerms, randomTerm())
			}
			pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: sel}}
		}
		m := newNodeMatcher(pod)
		if m.fallback == nil {
			compiled++
		}
		want := nodeaffinity.GetRequiredNodeAffinity(pod)
		for _, node := range nodes {
			if got, exp := m.Match(node), must(want.Match(node)); got != exp {
				t.Fatalf("case %d: Match(%v) = %v, component-helpers says %v, for nodeSelector %v affinity %+v", i, node.Labels, got, exp, pod.Spec.NodeSelector, pod.Spec.Affinity)
			}
		}
	}
	if compiled < 1000 {
		t.Fatalf("only %d of 3000 selectors compiled: the test exercises the fallback, not the matcher", compiled)
	}
}

func must(ok bool, _ error) bool { return ok }
