package placement

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// The benchmarks on the large cluster are in
// scheduling_benchmark_large_test.go.

// BenchmarkPredictEndStatesSmall searches every order of a 9-replica
// rollout from an uneven start over 4 zones, counting every revision: the
// largest shape of the differential test against the real controllers.
func BenchmarkPredictEndStatesSmall(b *testing.B) {
	objs := zonal("web", []string{"a", "b", "c", "d"}, map[string]int{"a": 5, "b": 3, "c": 1})
	w := deployment(objs, "web", 9, rolling(0, 3))
	c := Constraint{Spread: &Spread{TopologyKey: corev1.LabelTopologyZone, MaxSkew: 1, AllRevisions: true,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	spec, err := c.Apply(&w.Template.Spec, w.Selector, pgv1.StageHard)
	if err != nil {
		b.Fatal(err)
	}
	w.Template.Spec = *spec
	s, err := NewSnapshot(objs)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		es, err := s.PredictEndStates(w, c, 0)
		if err != nil || !es.Exhaustive {
			b.Fatalf("%v, exhaustive %v", err, es.Exhaustive)
		}
		b.ReportMetric(float64(es.Explored), "states")
	}
}
