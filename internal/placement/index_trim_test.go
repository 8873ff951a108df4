package placement

import (
	"fmt"
	"math/rand"
	"runtime"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// realistic dresses a pod as a real cluster's pods are dressed: managed
// fields, annotations, an image, environment, probes, a config volume and a
// full status, none of which the engine reads.
func realistic(p *corev1.Pod) *corev1.Pod {
	p = p.DeepCopy()
	p.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 1500), "prometheus.io/scrape": "true"}
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsV1: metav1.NewFieldsV1(strings.Repeat(`{"f:metadata":{}}`, 60))}}
	for i := range p.Spec.Containers {
		c := &p.Spec.Containers[i]
		c.Image = "registry.example.com/team/service:v1.2.3"
		c.Command = []string{"/bin/service", "--config=/etc/service/config.yaml"}
		for k := range 20 {
			c.Env = append(c.Env, corev1.EnvVar{Name: fmt.Sprintf("SETTING_%d", k), Value: "some-value"})
		}
		c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready"}}}
		c.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	}
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}})
	p.Status.PodIP = "10.0.0.1"
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Ready: true, RestartCount: 2, Image: "registry.example.com/team/service:v1.2.3", ImageID: strings.Repeat("f", 71)}}
	now := metav1.Now()
	for _, c := range []corev1.PodConditionType{"PodReadyToStartContainers", corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	return p
}

// TestTrimmedPodsGiveTheSameAnswers compares the engine's answers on full
// and trimmed pods over random clusters.
func TestTrimmedPodsGiveTheSameAnswers(t *testing.T) {
	for seed := int64(1); seed <= 300; seed++ {
		r := rand.New(rand.NewSource(seed))
		objs := randomCluster(r)
		full, trimmed := objs, objs
		full.Pods, trimmed.Pods = nil, nil
		trimmer := NewPodTrimmer(DefaultSharedParts)
		for _, p := range objs.Pods {
			rp := realistic(p)
			full.Pods = append(full.Pods, rp)
			tp := trimmer.Trim(rp)
			if !equality.Semantic.DeepEqual(tp, TrimPod(rp)) {
				t.Fatalf("seed %d: sharing changed pod %s: %+v", seed, p.Name, tp)
			}
			trimmed.Pods = append(trimmed.Pods, tp)
		}
		sf, err := NewSnapshot(full)
		if err != nil {
			t.Fatal(err)
		}
		st, err := NewSnapshot(trimmed)
		if err != nil {
			t.Fatal(err)
		}
		incoming := realistic(randomPod(r, "incoming", objs.Nodes, false))
		vf, _ := sf.Schedule(incoming)
		vt, _ := st.Schedule(TrimPod(incoming))
		if !slices.Equal(vf.Nodes, vt.Nodes) || vf.Message != vt.Message {
			t.Fatalf("seed %d: full pods allow %v (%s), trimmed %v (%s)", seed, vf.Nodes, vf.Message, vt.Nodes, vt.Message)
		}
	}
}

func TestTrimKeepsWhatTheGuardsCompare(t *testing.T) {
	p := realistic(mkPod("ns", "p", on("n1"), withLabels("app", "web"), claim("data"), requests("100m", "1Gi")))
	p.CreationTimestamp = metav1.Now()
	tp := TrimPod(p)
	if tp.UID != p.UID || !tp.CreationTimestamp.Equal(&p.CreationTimestamp) || tp.Status.ContainerStatuses[0].RestartCount != 2 || !tp.Status.ContainerStatuses[0].Ready {
		t.Fatalf("identity, creation time and restarts must survive: %+v", tp)
	}
	if len(tp.Status.Conditions) != 1 || tp.Status.Conditions[0].Type != corev1.PodReady || tp.Status.Conditions[0].Status != corev1.ConditionTrue {
		t.Fatalf("a running pod keeps its Ready status alone: %+v", tp.Status.Conditions)
	}
	pending := mkPod("ns", "q", withLabels("app", "web"))
	pending.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available"}}
	if c := TrimPod(pending).Status.Conditions; len(c) != 1 || c[0].Message != "0/3 nodes are available" || c[0].Reason != corev1.PodReasonUnschedulable {
		t.Fatalf("a Pending pod keeps why the scheduler left it: %+v", c)
	}
	if tp.ManagedFields != nil || tp.Annotations != nil || tp.Spec.Containers[0].Env != nil || tp.Spec.Containers[0].Image != "" {
		t.Fatal("managedFields, annotations, env and image must be dropped")
	}
	if len(tp.Spec.Volumes) != 1 || tp.Spec.Volumes[0].PersistentVolumeClaim == nil {
		t.Fatalf("only the claim volume stays: %+v", tp.Spec.Volumes)
	}
}

// BenchmarkTrimmedPodHeap reports the heap a cached trimmed pod keeps, for
// realistic pods: a typical one without constraints, and a heavy one with a
// spread and an anti-affinity term.
//
// The -shared variants trim through a PodTrimmer, as the operator's cache
// does: pods of one template share what they have in common.
func BenchmarkTrimmedPodHeap(b *testing.B) {
	for _, tc := range []struct {
		name   string
		opts   []podOpt
		shared bool
	}{
		{"typical", nil, false},
		{"with-spread-and-anti-affinity", []podOpt{spread(corev1.LabelTopologyZone, 1, map[string]string{"app": "web"}),
			antiAffinity(term(corev1.LabelHostname, map[string]string{"app": "web"}))}, false},
		{"typical-shared", nil, true},
		{"with-spread-and-anti-affinity-shared", []podOpt{spread(corev1.LabelTopologyZone, 1, map[string]string{"app": "web"}),
			antiAffinity(term(corev1.LabelHostname, map[string]string{"app": "web"}))}, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			const n = 20000
			src := make([]*corev1.Pod, n)
			for i := range n {
				opts := append([]podOpt{on("n1"), withLabels("app", "web", "pod-template-hash", "abc"), requests("100m", "128Mi")}, tc.opts...)
				src[i] = realistic(mkPod("ns", fmt.Sprintf("p-%d", i), opts...))
			}
			var before, after runtime.MemStats
			for b.Loop() {
				kept := make([]*corev1.Pod, n)
				trim := TrimPod
				if tc.shared {
					trim = NewPodTrimmer(DefaultSharedParts).Trim
				}
				runtime.GC()
				runtime.ReadMemStats(&before)
				for i, p := range src {
					// The cache holds a decoded copy; deep-copying first
					// measures the trimmed pod alone, not what it shares
					// with the source.
					kept[i] = trim(p.DeepCopy())
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heapB/pod")
				runtime.KeepAlive(kept)
			}
		})
	}
}
