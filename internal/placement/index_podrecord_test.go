package placement

import (
	"fmt"
	"math/rand"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/placement-guard/placement-guard/internal/podwire"
)

// podVariants dresses a pod in each of the states a record must keep
// apart: pending and unschedulable, ready since a time, restarted,
// terminating, resizing, with a generic ephemeral volume, with a deletion
// cost.
func podVariants(p *corev1.Pod, r *rand.Rand) *corev1.Pod {
	p = realistic(p)
	p.ResourceVersion = fmt.Sprint(r.Intn(1000))
	p.Generation = int64(r.Intn(3))
	p.CreationTimestamp = metav1.NewTime(metav1.Now().Add(-timeOf(r)))
	switch r.Intn(8) {
	case 0:
		p.Spec.NodeName = ""
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available"}}
	case 1:
		p.Status.ContainerStatuses[0].RestartCount = int32(r.Intn(5))
	case 2:
		p.DeletionTimestamp = &metav1.Time{Time: metav1.Now().Add(-timeOf(r))}
	case 3:
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: "Deferred"})
	case 4:
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}})
	case 5:
		p.Annotations[corev1.PodDeletionCost] = fmt.Sprint(r.Intn(10) - 5)
	case 6:
		p.Status.Conditions = nil
	}
	return p
}

func timeOf(r *rand.Rand) time.Duration { return time.Duration(r.Intn(100_000)) * time.Second }

// TestRecordsKeepWhatTrimPodKeeps: the pod the engine rebuilds from its
// record equals TrimPod's, for every pod of random clusters in every state,
// and the engine's answers over those records equal the brute-force
// scheduler's over the full pods.
func TestRecordsKeepWhatTrimPodKeeps(t *testing.T) {
	for seed := int64(1); seed <= 300; seed++ {
		r := rand.New(rand.NewSource(seed))
		objs := randomCluster(r)
		for i, p := range objs.Pods {
			objs.Pods[i] = podVariants(p, r)
		}
		s, err := NewSnapshot(objs)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range objs.Pods {
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			got, ok := s.Pod(p.UID)
			if !ok {
				t.Fatalf("seed %d: pod %s missing", seed, p.Name)
			}
			if want := TrimPod(p); !equality.Semantic.DeepEqual(got, want) {
				t.Fatalf("seed %d: pod %s rebuilt from its record differs from TrimPod's:\n got %+v\nwant %+v", seed, p.Name, got, want)
			}
		}
		incoming := randomPod(r, "incoming", objs.Nodes, false)
		compareWithOracle(t, seed, objs, s, incoming)
	}
}

func TestPodsOfOneTemplateShareOneShape(t *testing.T) {
	s, err := NewSnapshot(Objects{})
	if err != nil {
		t.Fatal(err)
	}
	mk := func(name, node string, opts ...podOpt) *corev1.Pod {
		opts = append([]podOpt{on(node), withLabels("app", "web", "pod-template-hash", "abc"), requests("100m", "128Mi"),
			antiAffinity(term(corev1.LabelHostname, map[string]string{"app": "web"}))}, opts...)
		p := realistic(mkPod("ns", name, opts...))
		p.UID = types.UID("uid-" + name)
		if err := s.UpsertPod(p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := mk("a", "n1"), mk("b", "n2")
	b.Status.ContainerStatuses[0].RestartCount = 9
	b.Status.Conditions = nil
	if err := s.UpsertPod(b); err != nil {
		t.Fatal(err)
	}
	ra, rb := s.pods[s.podByUID[a.UID]], s.pods[s.podByUID[b.UID]]
	if ra.shape != rb.shape {
		t.Fatal("two pods of one template on different nodes, in different states, do not share their shape")
	}
	if ra.name != "a" || rb.name != "b" || ra.nodeName != "n1" || rb.nodeName != "n2" || rb.restarts() != 9 || ra.restarts() != 2 {
		t.Fatalf("each pod keeps its own identity, node and status: %+v %+v", ra, rb)
	}
	if sh := ra.common(); sh.Name != "" || sh.UID != "" || sh.Spec.NodeName != "" || sh.Status.Phase != "" {
		t.Fatalf("a shape carries no pod's own fields: %+v", sh)
	}
	if c := mk("c", "n1", withLabels("app", "api")); s.pods[s.podByUID[c.UID]].shape == ra.shape {
		t.Fatal("pods with other labels share a shape")
	}
	// A generic ephemeral volume's claim is named after its pod: such a
	// pod's shape is its own and keeps the name.
	eph := func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}})
	}
	d, e := mk("d", "n1", eph), mk("e", "n1", eph)
	rd, re := s.pods[s.podByUID[d.UID]], s.pods[s.podByUID[e.UID]]
	if rd.shape == re.shape || rd.common().Name != "d" || re.common().Name != "e" {
		t.Fatal("pods with generic ephemeral volumes share a shape, or lose the name their claims are named after")
	}
}

func TestPodsAreFoundByControllerAndSelector(t *testing.T) {
	s, err := NewSnapshot(Objects{})
	if err != nil {
		t.Fatal(err)
	}
	owned := func(name, owner string, lbls ...string) *corev1.Pod {
		p := mkPod("ns", name, on("n1"), withLabels(lbls...))
		p.UID = types.UID("uid-" + name)
		if owner != "" {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: owner, UID: types.UID(owner), Controller: ptrTo(true)}}
		}
		if err := s.UpsertPod(p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	owned("web-2", "rs-1", "app", "web")
	owned("web-1", "rs-1", "app", "web")
	gone := owned("web-3", "rs-1", "app", "web")
	gone.DeletionTimestamp = &metav1.Time{Time: metav1.Now().Time}
	if err := s.UpsertPod(gone); err != nil {
		t.Fatal(err)
	}
	owned("api-1", "rs-2", "app", "api")
	owned("bare", "", "app", "web")
	other := mkPod("elsewhere", "web-9", on("n1"), withLabels("app", "web"))
	other.UID = "uid-elsewhere"
	other.OwnerReferences = []metav1.OwnerReference{{Name: "rs-1", UID: "rs-1", Controller: ptrTo(true)}}
	if err := s.UpsertPod(other); err != nil {
		t.Fatal(err)
	}
	names := func(pods []*corev1.Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Name)
		}
		return out
	}
	if got := names(s.PodsControlledBy("ns", "rs-1")); fmt.Sprint(got) != "[web-1 web-2]" {
		t.Fatalf("pods controlled by rs-1 = %v, want the live ones of its namespace by name", got)
	}
	if got := names(s.PodsSelected("ns", labels.SelectorFromSet(labels.Set{"app": "web"}))); fmt.Sprint(got) != "[bare web-1 web-2]" {
		t.Fatalf("pods selected by app=web = %v", got)
	}
	s.DeletePod("uid-web-1")
	if got := names(s.PodsControlledBy("ns", "rs-1")); fmt.Sprint(got) != "[web-2]" {
		t.Fatalf("after a deletion: %v", got)
	}
}

// BenchmarkPodRecordHeap reports the heap the snapshot keeps per realistic
// pod (its record, shared shape and indexes), pods of 100 templates on
// 1,000 nodes, each decoded from protobuf as the watch decodes it: the
// live heap, and the heap in use, which also counts the spans the decoded
// pods' garbage leaves partly used.
func BenchmarkPodRecordHeap(b *testing.B) {
	const n = 30000
	src := make([][]byte, n)
	for i := range n {
		p := realistic(mkPod(fmt.Sprintf("ns-%d", i%10), fmt.Sprintf("app-%d-%d", i%100, i), on(fmt.Sprintf("n%d", i%1000)),
			withLabels("app", fmt.Sprintf("app-%d", i%100), "pod-template-hash", "abc"), requests("100m", "128Mi")))
		p.UID = types.UID(fmt.Sprintf("8c1f5a2e-0c4b-4e7a-9d55-%012d", i))
		p.ResourceVersion = fmt.Sprint(1000000 + i)
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: fmt.Sprintf("app-%d-abc", i%100), UID: types.UID(fmt.Sprintf("rs-%d", i%100)), Controller: ptrTo(true)}}
		raw, err := p.Marshal()
		if err != nil {
			b.Fatal(err)
		}
		src[i] = raw
	}
	var before, after runtime.MemStats
	for b.Loop() {
		runtime.GC()
		runtime.ReadMemStats(&before)
		s, err := NewSnapshot(Objects{})
		if err != nil {
			b.Fatal(err)
		}
		for _, raw := range src {
			// The operator indexes a pod it decoded as the pod feed does,
			// then drops it.
			p := &corev1.Pod{}
			if err := podwire.DecodePod(raw, p); err != nil {
				b.Fatal(err)
			}
			if err := s.UpsertPod(p); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n, "heapB/pod")
		b.ReportMetric(float64(int64(after.HeapInuse)-int64(before.HeapInuse))/n, "inuseB/pod")
		runtime.KeepAlive(s)
	}
	runtime.KeepAlive(src)
}
