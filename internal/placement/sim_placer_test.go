package placement

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestThePlacerPlacesAsTheSchedulerScores: pods one after another, each
// seeing the ones before it. A pod nothing selects goes to the least
// requested node every time; one a Service selects spreads by the system
// default constraints, which outweigh the requests.
func TestThePlacerPlacesAsTheSchedulerScores(t *testing.T) {
	objs := Objects{
		Nodes: []*corev1.Node{mkNode("busy"), mkNode("idle"), mkNode("half")},
		Pods: []*corev1.Pod{
			mkPod("ns", "other-1", on("busy"), requests("3", "1Gi")),
			mkPod("ns", "other-2", on("half"), requests("2", "1Gi")),
		},
	}
	pod := mkPod("ns", "web", withLabels("app", "web"), requests("100m", "64Mi"))
	placements := func(objs Objects) []string {
		s, err := NewSnapshot(objs)
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.newPlacer(nil, pod)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for range 4 {
			got = append(got, p.nodeName(p.place(pod)))
		}
		return got
	}
	if got, want := fmt.Sprint(placements(objs)), fmt.Sprint([]string{"idle", "idle", "idle", "idle"}); got != want {
		t.Errorf("unselected: placed on %s, want %s", got, want)
	}
	objs.Services = []*corev1.Service{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}}}}
	if got, want := fmt.Sprint(placements(objs)), fmt.Sprint([]string{"idle", "half", "busy", "idle"}); got != want {
		t.Errorf("selected by a Service: placed on %s, want %s", got, want)
	}
}

// The snapshot keeps its nodes in order of load for the placers it makes;
// a pod that lands on a node, a node's allocatable that changes, must
// reorder them for the next placer.
func TestAPlacerSeesTheLoadsOfTheSnapshotAsTheyAreNow(t *testing.T) {
	s, err := NewSnapshot(Objects{Nodes: []*corev1.Node{mkNode("a"), mkNode("b"), mkNode("c")}})
	if err != nil {
		t.Fatal(err)
	}
	pod := mkPod("ns", "web", withLabels("app", "web"), requests("100m", "64Mi"))
	first := func() string {
		p, err := s.newPlacer(nil, pod)
		if err != nil {
			t.Fatal(err)
		}
		return p.nodeName(p.place(pod))
	}
	if got := first(); got != "a" {
		t.Fatalf("first placement on %s, want a, the lowest name among idle nodes", got)
	}
	for _, p := range []*corev1.Pod{mkPod("ns", "batch", on("a"), requests("3", "1Gi")), mkPod("ns", "small", on("b"), requests("100m", "64Mi")),
		mkPod("ns", "smaller", on("c"), requests("200m", "64Mi"))} {
		if err := s.UpsertPod(p); err != nil {
			t.Fatal(err)
		}
	}
	if got := first(); got != "b" {
		t.Fatalf("with a busy, placed on %s, want b, the least requested", got)
	}
	s.UpsertNode(mkNode("b", alloc("1", "8Gi", "110")))
	if got := first(); got != "c" {
		t.Fatalf("with b's CPU cut to one core, placed on %s, want c", got)
	}
}

// TestThePlacerScoresAsAFreshSnapshotWould: the placer follows what it
// binds and removes incrementally; on random clusters and random pods,
// with pods of the cluster removed between placements, each placement is
// among the best-scored nodes of a snapshot that holds the same pods from
// the start, asked afresh.
func TestThePlacerScoresAsAFreshSnapshotWould(t *testing.T) {
	compared := 0
	for seed := int64(1); seed <= 300; seed++ {
		r := rand.New(rand.NewSource(seed))
		objs := randomCluster(r)
		// Services select some apps, which then spread by the system
		// default constraints.
		for _, app := range apps {
			for _, ns := range []string{"ns1", "ns2"} {
				if r.Intn(2) == 0 {
					objs.Services = append(objs.Services, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app},
						Spec: corev1.ServiceSpec{Selector: map[string]string{"app": app}}})
				}
			}
		}
		s, err := NewSnapshot(objs)
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := NewSnapshot(objs)
		if err != nil {
			t.Fatal(err)
		}
		pod := randomPod(r, "incoming", objs.Nodes, false)
		p, err := s.newPlacer(nil, pod)
		if err != nil {
			continue // a selector the engine refuses; not the placer's concern
		}
		var bound []*corev1.Pod
		for _, o := range objs.Pods {
			if o.Spec.NodeName != "" {
				bound = append(bound, o)
			}
		}
		for k := range 1 + r.Intn(8) {
			if len(bound) > 0 && r.Intn(3) == 0 {
				gone := bound[r.Intn(len(bound))]
				bound = slices.DeleteFunc(bound, func(b *corev1.Pod) bool { return b == gone })
				p.remove(s.podByUID[gone.UID])
				fresh.DeletePod(gone.UID)
			}
			l, err := fresh.Land(pod)
			if err != nil {
				t.Fatal(err)
			}
			got := p.place(pod)
			if got < 0 {
				if len(l.Best) > 0 {
					t.Fatalf("seed %d, placement %d: the placer found no node, a fresh snapshot %v", seed, k, l.Best)
				}
				break
			}
			name := p.nodeName(got)
			if !slices.Contains(l.Best, name) {
				t.Fatalf("seed %d, placement %d: placed on %s, a fresh snapshot's best are %v\nranking %+v", seed, k, name, l.Best, l.Ranking)
			}
			compared++
			placed := pod.DeepCopy()
			placed.Name, placed.UID, placed.Spec.NodeName = fmt.Sprintf("placed-%d", k), types.UID(fmt.Sprintf("placed-%d-%d", seed, k)), name
			if err := fresh.UpsertPod(placed); err != nil {
				t.Fatal(err)
			}
		}
	}
	if compared < 300 {
		t.Fatalf("only %d placements compared", compared)
	}
}

// A snapshot that omits ties gives the same steps, each on the same node,
// without the nodes tied with it; one that names them names every other
// node of the best score (three empty nodes tie for the first pod).
func TestOmittedTiesLeaveEveryChoiceAsItWas(t *testing.T) {
	objs := Objects{Nodes: []*corev1.Node{mkNode("a"), mkNode("b"), mkNode("c")}}
	rollout := func(omit bool) Rollout {
		s, err := NewSnapshot(objs)
		if err != nil {
			t.Fatal(err)
		}
		if omit {
			s.OmitTies()
		}
		r, err := s.SimulateRollout(deployment(objs, "web", 3, unavailable(1), requests("100m", "64Mi")))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	named, omitted := rollout(false), rollout(true)
	if len(named.Steps) != len(omitted.Steps) || len(named.Steps) == 0 {
		t.Fatalf("steps named %d, omitted %d", len(named.Steps), len(omitted.Steps))
	}
	if first := named.Steps[0]; first.Action != StepCreate || len(first.Tied) != 2 {
		t.Errorf("the first pod's step names %v tied with %s, want the two other empty nodes", first.Tied, first.Node)
	}
	for i := range named.Steps {
		n, o := named.Steps[i], omitted.Steps[i]
		if n.Action != o.Action || n.Pod != o.Pod || n.Node != o.Node || n.Sampled != o.Sampled {
			t.Errorf("step %d: %+v with ties named, %+v omitted", i, n, o)
		}
		if len(o.Tied) > 0 {
			t.Errorf("step %d names its ties %v though the snapshot omits them", i, o.Tied)
		}
	}
}
