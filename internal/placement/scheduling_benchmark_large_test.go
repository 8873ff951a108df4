package placement_test

import (
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"

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
	// As the operator's snapshot: nothing it says reads a step's ties.
	s.OmitTies()
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

// BenchmarkAnalyzeAfterAPodEvent is the benchmark question asked as the
// operator meets it: after a pod event, here an unrelated pod's update
// (two versions alternating, as a status update would), which drops what
// the snapshot keeps between questions that a pod event drops.
func BenchmarkAnalyzeAfterAPodEvent(b *testing.B) {
	c, s := snapshot(b)
	q := question(benchcluster.WithHostnameAntiAffinity(c.Workload))
	if _, err := s.Analyze(q); err != nil {
		b.Fatal(err)
	}
	next := podEvents(c, false)
	b.ReportAllocs()
	for b.Loop() {
		p := next()
		if err := s.UpsertPod(p); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Analyze(q); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUpsertPod(b *testing.B) {
	c, s := snapshot(b)
	next := podEvents(c, true)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.UpsertPod(next()); err != nil {
			b.Fatal(err)
		}
	}
}

// podEvents returns, call after call, two versions of one pod in turn, as
// a status update would: relabelled, and moved to another node too when
// moved is set.
func podEvents(c *benchcluster.Cluster, moved bool) func() *corev1.Pod {
	p1 := c.Objects.Pods[12345]
	p2 := p1.DeepCopy()
	if moved {
		p2.Spec.NodeName = c.Objects.Nodes[7].Name
	}
	p2.Labels = map[string]string{"app": "moved", "team": p1.Namespace}
	i := 0
	return func() *corev1.Pod {
		i++
		if i%2 == 0 {
			return p2
		}
		return p1
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
