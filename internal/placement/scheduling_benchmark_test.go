package placement

import (
	"fmt"
	"math/rand"
	"runtime"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The benchmark cluster: 5,000 nodes in 10 zones and 150,000 pods (30 a
// node) in 50 namespaces, 1% of them with a required anti-affinity term, and
// a 100-replica Deployment to migrate to a hard zone spread and a hard
// hostname anti-affinity with the default 25% surge.
const (
	benchNodes      = 5000
	benchZones      = 10
	benchPodsPerNod = 30
	benchReplicas   = 100
)

type benchCluster struct {
	objs     Objects
	workload *Workload
}

var benchCache *benchCluster

func largeCluster() *benchCluster {
	if benchCache != nil {
		return benchCache
	}
	r := rand.New(rand.NewSource(1))
	var o Objects
	for i := range 50 {
		o.Namespaces = append(o.Namespaces, mkNamespace(fmt.Sprintf("team-%02d", i)))
	}
	for i := range benchNodes {
		n := mkNode(fmt.Sprintf("node-%05d", i), zone(fmt.Sprintf("zone-%d", i%benchZones)), alloc("64", "256Gi", "110"))
		o.Nodes = append(o.Nodes, n)
	}
	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}
	for i := range benchNodes * benchPodsPerNod {
		ns := fmt.Sprintf("team-%02d", i%50)
		app := fmt.Sprintf("app-%04d", r.Intn(2000))
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: ns, Name: fmt.Sprintf("%s-%d", app, i), UID: types.UID(fmt.Sprintf("uid-%d", i)),
				Labels: map[string]string{"app": app, "pod-template-hash": fmt.Sprintf("h%d", r.Intn(3)), "team": ns},
			},
			Spec: corev1.PodSpec{
				NodeName:   o.Nodes[r.Intn(benchNodes)].Name,
				Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: req}}},
			},
			Status: corev1.PodStatus{Phase: corev1.PodRunning},
		}
		if i%100 == 0 {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
			}}}
		}
		o.Pods = append(o.Pods, p)
	}
	// The target Deployment's current pods replace the first 100 pods of
	// team-00, on distinct nodes.
	w := &Workload{Kind: Deployment, Namespace: "team-00", Name: "checkout", Replicas: benchReplicas,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "checkout"}}}
	w.Template.Labels = map[string]string{"app": "checkout"}
	w.Template.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: req}}}
	for k := range benchReplicas {
		p := o.Pods[k*50]
		p.Namespace = "team-00"
		p.Labels = map[string]string{"app": "checkout", "pod-template-hash": "old"}
		p.Spec.Affinity = nil
		p.Spec.NodeName = o.Nodes[k*37].Name
		w.Pods = append(w.Pods, p.UID)
	}
	benchCache = &benchCluster{objs: o, workload: w}
	return benchCache
}

func benchQuestion(w *Workload) Question {
	return Question{
		Workloads: []*Workload{w},
		Constraint: Constraint{Spread: &Spread{TopologyKey: corev1.LabelTopologyZone, MaxSkew: 1,
			MatchLabelKeys: []string{appsv1.DefaultDeploymentUniqueLabelKey}}},
		Stage: StageHard,
	}
}

// withHostnameAntiAffinity adds a hard hostname anti-affinity among the
// workload's own pods to its template, so the question carries both.
func withHostnameAntiAffinity(w *Workload) *Workload {
	c := *w
	c.Template = *w.Template.DeepCopy()
	c.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
		{TopologyKey: corev1.LabelHostname, LabelSelector: w.Selector, MatchLabelKeys: []string{appsv1.DefaultDeploymentUniqueLabelKey}},
	}}}
	return &c
}

func BenchmarkSnapshotBuild(b *testing.B) {
	c := largeCluster()
	b.ReportAllocs()
	var before, after runtime.MemStats
	for b.Loop() {
		runtime.GC()
		runtime.ReadMemStats(&before)
		s, err := NewSnapshot(c.objs)
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
	c := largeCluster()
	s, err := NewSnapshot(c.objs)
	if err != nil {
		b.Fatal(err)
	}
	q := benchQuestion(withHostnameAntiAffinity(c.workload))
	a, err := s.Analyze(q)
	if err != nil {
		b.Fatal(err)
	}
	if len(a.Hazards) != 0 || !a.Rollouts["Deployment/checkout"].Completes {
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
	c := largeCluster()
	s, err := NewSnapshot(c.objs)
	if err != nil {
		b.Fatal(err)
	}
	// Alternate between two versions of one pod, as a status update would.
	p1 := c.objs.Pods[12345]
	p2 := p1.DeepCopy()
	p2.Spec.NodeName = c.objs.Nodes[7].Name
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
	c := largeCluster()
	s, err := NewSnapshot(c.objs)
	if err != nil {
		b.Fatal(err)
	}
	n1 := c.objs.Nodes[42]
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

// BenchmarkPredictEndStatesSmall searches every order of a 9-replica
// rollout from an uneven start over 4 zones, counting every revision: the
// largest shape of the differential test against the real controllers.
func BenchmarkPredictEndStatesSmall(b *testing.B) {
	objs := zonal("web", []string{"a", "b", "c", "d"}, map[string]int{"a": 5, "b": 3, "c": 1})
	w := deployment(objs, "web", 9, rolling(0, 3))
	c := Constraint{Spread: &Spread{TopologyKey: corev1.LabelTopologyZone, MaxSkew: 1, AllRevisions: true,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	spec, err := c.Apply(&w.Template.Spec, w.Selector, StageHard)
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

// BenchmarkAnalyzeAllRevisionsLarge is the benchmark question with the
// spread counting every revision on the large cluster: the end-state search
// runs until its work bound.
func BenchmarkAnalyzeAllRevisionsLarge(b *testing.B) {
	c := largeCluster()
	s, err := NewSnapshot(c.objs)
	if err != nil {
		b.Fatal(err)
	}
	q := benchQuestion(c.workload)
	q.Constraint.Spread.MatchLabelKeys = nil
	q.Constraint.Spread.AllRevisions = true
	b.ReportAllocs()
	for b.Loop() {
		a, err := s.Analyze(q)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(a.EndStates["Deployment/checkout"].Explored), "states")
	}
}
