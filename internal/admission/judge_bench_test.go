package admission_test

import (
	"runtime"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/placement-guard/placement-guard/internal/admission"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/placement/benchcluster"
	"github.com/placement-guard/placement-guard/internal/planning"
	"github.com/placement-guard/placement-guard/internal/targets"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// BenchmarkJudgeLarge is one judged admission request on the benchmark
// cluster of docs/performance.md (5,000 nodes, 150,000 pods): the
// 100-replica Deployment's template given hard constraints straight, as a
// Helm upgrade would. Besides the mean it reports the median and the 99th
// percentile of the judgements, the figures the admission budget is about.
func BenchmarkJudgeLarge(b *testing.B) {
	c, snap := largeCluster(b)
	for _, bc := range judgeCases(b, c) {
		b.Run(bc.name, func(b *testing.B) {
			ch := bc.ready(b, c, snap)
			var took []time.Duration
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				if _, err := admission.Judge(snap, ch); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
			}
			reportPercentiles(b, took)
		})
	}
}

// BenchmarkJudgeStream is the same judgements as a stream of Deployment
// updates brings them: 50 a second (the rate the e2e load spec sends),
// each timed alone, with the time between them left to the rest of the
// process, the garbage collector among it, as in the manager. Between two
// judgements a pod of another workload moves to another node, as pods
// come and go in a cluster: what the snapshot keeps between questions
// that a pod changes (its nodes by load, existing pods' anti-affinity
// counts) is made again for each judgement. Its p50 and p99 are the
// admission budget's figures; ns/op includes the waits and means nothing.
func BenchmarkJudgeStream(b *testing.B) {
	const interval = 20 * time.Millisecond
	c, snap := largeCluster(b)
	for _, bc := range judgeCases(b, c) {
		b.Run(bc.name, func(b *testing.B) {
			ch := bc.ready(b, c, snap)
			var took []time.Duration
			next := time.Now()
			moving := c.Objects.Pods[1].DeepCopy() // another app's: the first is the Deployment's
			nodes := []string{c.Objects.Nodes[0].Name, c.Objects.Nodes[1].Name}
			for k := 0; b.Loop(); k++ {
				next = next.Add(interval)
				time.Sleep(time.Until(next))
				moving.Spec.NodeName = nodes[k%2]
				if err := snap.UpsertPod(moving); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				if _, err := admission.Judge(snap, ch); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
			}
			reportPercentiles(b, took)
		})
	}
}

func largeCluster(b *testing.B) (*benchcluster.Cluster, *placement.Snapshot) {
	c := benchcluster.Large()
	snap, err := placement.NewSnapshot(c.Objects)
	if err != nil {
		b.Fatal(err)
	}
	// As the manager's snapshot, which the check judges on.
	snap.OmitTies()
	runtime.GC()
	return c, snap
}

// judgeCase is a change to the benchmark cluster's 100-replica Deployment.
type judgeCase struct {
	name     string
	change   func(*placement.Workload) *placement.Workload
	blocking bool
	workload *placement.Workload
}

// ready is the change, once judged as the case expects.
func (jc judgeCase) ready(b *testing.B, c *benchcluster.Cluster, snap *placement.Snapshot) planning.Change {
	ch := changeOf(c, jc.change(jc.workload))
	findings, err := admission.Judge(snap, ch)
	if err != nil {
		b.Fatal(err)
	}
	if blocking := len(findings) > 0 && findings[0].Blocking; blocking != jc.blocking {
		b.Fatalf("blocking %v, want %v: %+v", blocking, jc.blocking, findings)
	}
	return ch
}

// changeOf is a Helm upgrade's change to the benchmark's Deployment: w,
// with the pods it runs, alone in its namespace.
func changeOf(c *benchcluster.Cluster, w *placement.Workload) planning.Change {
	d := &appsv1.Deployment{}
	d.Namespace, d.Name = w.Namespace, w.Name
	t := targets.Build(d, nil, nil)
	t.Workload = w
	for _, p := range c.Objects.Pods {
		if slices.Contains(w.Pods, p.UID) {
			t.Pods = append(t.Pods, p)
		}
	}
	return planning.Change{Target: t}
}

func judgeCases(b *testing.B, c *benchcluster.Cluster) []judgeCase {
	return []judgeCase{
		// A hard hostname anti-affinity with room on every node: the
		// rollout is simulated to its end and nothing is found.
		{name: "anti-affinity-fits", change: benchcluster.WithHostnameAntiAffinity, workload: c.Workload},
		// Both hard constraints at once: each is judged with the other in
		// the template.
		{name: "spread-and-anti-affinity", workload: c.Workload, change: func(w *placement.Workload) *placement.Workload {
			w = benchcluster.WithHostnameAntiAffinity(w)
			spec, err := benchcluster.ZoneSpread().Apply(&w.Template.Spec, w.Selector, pgv1.StageHard)
			if err != nil {
				b.Fatal(err)
			}
			w.Template.Spec = *spec
			return w
		}},
		// Seed 001's shape at scale: a hard hostname anti-affinity against
		// every pod of the Deployment (no matchLabelKeys), kept to the 100
		// nodes it runs on, maxUnavailable 0: no surge pod can be placed.
		{name: "rollout-deadlock", blocking: true, workload: c.Workload, change: func(w *placement.Workload) *placement.Workload {
			w = benchcluster.WithHostnameAntiAffinity(w)
			w.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].MatchLabelKeys = nil
			w.Template.Spec.Affinity.NodeAffinity = onNodesOf(c.Objects.Pods, w)
			w.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}}
			return w
		}},
	}
}

// reportPercentiles reports the median and the 99th percentile of the
// judgements, the figures the admission budget is about.
func reportPercentiles(b *testing.B, took []time.Duration) {
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
}

// onNodesOf keeps a workload's pods to the nodes its pods run on.
func onNodesOf(pods []*corev1.Pod, w *placement.Workload) *corev1.NodeAffinity {
	var names []string
	for _, p := range pods {
		if slices.Contains(w.Pods, p.UID) {
			names = append(names, p.Spec.NodeName)
		}
	}
	return &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: names}},
	}}}}
}
