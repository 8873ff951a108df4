package placement

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestKeptScoresFollowEveryEvent: the snapshot keeps nodes' resource
// scores, and whether any node has a PreferNoSchedule taint, between
// questions. On random clusters, after each of a random sequence of pod
// and node events (a pod bound, deleted, moved or resized; a node's
// allocatable or PreferNoSchedule taint changed; a node added or deleted),
// every feasible node scores what it scores in a snapshot built afresh
// from the same objects, for pods of two shapes asked in turn.
func TestKeptScoresFollowEveryEvent(t *testing.T) {
	compared := 0
	for seed := int64(1); seed <= 200; seed++ {
		r := rand.New(rand.NewSource(seed))
		objs := randomCluster(r)
		s, err := NewSnapshot(objs)
		if err != nil {
			t.Fatal(err)
		}
		shapes := []*corev1.Pod{
			mkPod("ns1", "small", requests("100m", "128Mi")),
			mkPod("ns1", "large", requests(fmt.Sprintf("%dm", 200*(1+r.Intn(5))), fmt.Sprintf("%dMi", 256*(1+r.Intn(4))))),
		}
		for event := range 12 {
			for _, pod := range shapes {
				compared += compareScores(t, fmt.Sprintf("seed %d, event %d, pod %s", seed, event, pod.Name), s, objs, pod)
			}
			objs = randomEvent(t, r, s, objs, fmt.Sprintf("e%d-%d", seed, event))
		}
	}
	if compared < 5000 {
		t.Fatalf("only %d scores compared", compared)
	}
}

// compareScores checks that every node pod fits on scores in s what it
// scores in a snapshot of objs made now; it returns how many it compared.
func compareScores(t *testing.T, what string, s *Snapshot, objs Objects, pod *corev1.Pod) int {
	t.Helper()
	fresh, err := NewSnapshot(objs)
	if err != nil {
		t.Fatal(err)
	}
	scores := func(s *Snapshot) map[string]int64 {
		p, err := s.newPlacer(nil, pod)
		if err != nil {
			t.Fatal(err)
		}
		feasible := p.e.feasible()
		totals, _ := p.sc.totals(feasible, false)
		out := map[string]int64{}
		for k, i := range feasible {
			out[p.nodeName(i)] = totals[k]
		}
		return out
	}
	got, want := scores(s), scores(fresh)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: the snapshot scores %v, a fresh one %v", what, got, want)
	}
	return len(got)
}

// randomEvent changes objs by one random pod or node event, tells s, and
// returns the objects as they are after it.
func randomEvent(t *testing.T, r *rand.Rand, s *Snapshot, objs Objects, name string) Objects {
	t.Helper()
	objs.Pods, objs.Nodes = slices.Clone(objs.Pods), slices.Clone(objs.Nodes)
	upsert := func(p *corev1.Pod) {
		if err := s.UpsertPod(p); err != nil {
			t.Fatal(err)
		}
	}
	someNode := func() string { return objs.Nodes[r.Intn(len(objs.Nodes))].Name }
	switch k := r.Intn(7); {
	case k == 0 || len(objs.Pods) == 0:
		p := mkPod("ns1", name, on(someNode()), requests(fmt.Sprintf("%dm", 100*(1+r.Intn(9))), "256Mi"))
		p.UID = types.UID(name)
		objs.Pods = append(objs.Pods, p)
		upsert(p)
	case k == 1:
		j := r.Intn(len(objs.Pods))
		s.DeletePod(objs.Pods[j].UID)
		objs.Pods = slices.Delete(objs.Pods, j, j+1)
	case k == 2 || k == 3:
		j := r.Intn(len(objs.Pods))
		p := objs.Pods[j].DeepCopy()
		if k == 2 {
			p.Spec.NodeName = someNode()
		} else {
			requests(fmt.Sprintf("%dm", 100*(1+r.Intn(9))), fmt.Sprintf("%dMi", 128*(1+r.Intn(8))))(p)
		}
		objs.Pods[j] = p
		upsert(p)
	case k == 4 || k == 5:
		j := r.Intn(len(objs.Nodes))
		n := objs.Nodes[j].DeepCopy()
		if k == 4 {
			alloc(fmt.Sprintf("%d", 2+r.Intn(6)), fmt.Sprintf("%dGi", 4+r.Intn(12)), "110")(n)
		} else if len(n.Spec.Taints) > 0 {
			n.Spec.Taints = nil
		} else {
			n.Spec.Taints = []corev1.Taint{{Key: "avoid", Effect: corev1.TaintEffectPreferNoSchedule}}
		}
		objs.Nodes[j] = n
		s.UpsertNode(n)
	default:
		if len(objs.Nodes) > 1 && r.Intn(2) == 0 {
			j := r.Intn(len(objs.Nodes))
			s.DeleteNode(objs.Nodes[j].Name)
			objs.Nodes = slices.Delete(objs.Nodes, j, j+1)
			break
		}
		n := mkNode(name, zone("a"))
		objs.Nodes = append(objs.Nodes, n)
		s.UpsertNode(n)
	}
	return objs
}
