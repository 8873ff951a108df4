package placement_test

import (
	"runtime"
	"testing"

	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/placement/benchcluster"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// The benchmarks on the benchmark cluster of docs/performance.md.

// snapshot indexes the benchmark cluster, then collects the garbage the
// build left so that a short benchmark does not pay for it.
func snapshot(b *testing.B) (*benchcluster.Cluster, *placement.Snapshot) {
	b.Helper()
	c := benchcluster.Large()
	s, err := placement.NewSnapshot(c.Objects)
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	return c, s
}

func question(w *placement.Workload) placement.Question {
	return placement.Question{Workloads: []*placement.Workload{w}, Constraint: benchcluster.ZoneSpread(), Stage: pgv1.StageHard}
}

func BenchmarkSnapshotBuild(b *testing.B) {
	c := benchcluster.Large()
	b.ReportAllocs()
	var before, after runtime.MemStats
	for b.Loop() {
		runtime.GC()
		runtime.ReadMemStats(&before)
		s, err := placement.NewSnapshot(c.Objects)
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(s.PodCount()), "heapB/pod")
		runtime.KeepAlive(s)
	}
}

func BenchmarkAnalyzeHardSpreadAndAntiAffinity(b *testing.B) {
	c, s := snapshot(b)
	q := question(benchcluster.WithHostnameAntiAffinity(c.Workload))
	a, err := s.Analyze(q)
	if err != nil {
		b.Fatal(err)
	}
	if len(a.Hazards) != 0 || !a.Rollouts[pgv1.TargetRef{Kind: pgv1.KindDeployment, Name: "checkout"}].Completes {
		b.Fatalf("the benchmark question must be feasible: %+v", a.Hazards)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Analyze(q); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUpsertPod(b *testing.B) {
	c, s := snapshot(b)
	// Alternate between two versions of one pod, as a status update would.
	p1 := c.Objects.Pods[12345]
	p2 := p1.DeepCopy()
	p2.Spec.NodeName = c.Objects.Nodes[7].Name
	p2.Labels = map[string]string{"app": "moved", "team": p1.Namespace}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p := p1
		if i%2 == 1 {
			p = p2
		}
		if err := s.UpsertPod(p); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkUpsertNode(b *testing.B) {
	c, s := snapshot(b)
	n1 := c.Objects.Nodes[42]
	n2 := n1.DeepCopy()
	n2.Spec.Unschedulable = true
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		n := n1
		if i%2 == 1 {
			n = n2
		}
		s.UpsertNode(n)
		i++
	}
}

// BenchmarkAnalyzeAllRevisionsLarge is the benchmark question with the
// spread counting every revision on the large cluster: the end-state search
// runs until its work bound.
func BenchmarkAnalyzeAllRevisionsLarge(b *testing.B) {
	c, s := snapshot(b)
	q := question(c.Workload)
	q.Constraint.Spread.MatchLabelKeys = nil
	q.Constraint.Spread.AllRevisions = true
	b.ReportAllocs()
	for b.Loop() {
		a, err := s.Analyze(q)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(a.EndStates[pgv1.TargetRef{Kind: pgv1.KindDeployment, Name: "checkout"}].Explored), "states")
	}
}
