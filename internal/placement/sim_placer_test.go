package placement

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestThePlacerSpreadsThenFillsTheLeastLoaded: a pod goes where the
// workload has the fewest pods, then to the least requested node, as the
// scheduler's scoring would put it.
func TestThePlacerSpreadsThenFillsTheLeastLoaded(t *testing.T) {
	objs := Objects{
		Nodes: []*corev1.Node{mkNode("busy"), mkNode("idle"), mkNode("half")},
		Pods: []*corev1.Pod{
			mkPod("ns", "other-1", on("busy"), requests("3", "1Gi")),
			mkPod("ns", "other-2", on("half"), requests("2", "1Gi")),
		},
	}
	s, err := NewSnapshot(objs)
	if err != nil {
		t.Fatal(err)
	}
	pod := mkPod("ns", "web", withLabels("app", "web"), requests("100m", "64Mi"))
	p, err := s.newPlacer(pod, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 4 {
		got = append(got, p.nodeName(p.place(pod)))
	}
	if want := fmt.Sprint([]string{"idle", "half", "busy", "idle"}); fmt.Sprint(got) != want {
		t.Fatalf("placed on %v, want %s", got, want)
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
		p, err := s.newPlacer(pod, nil)
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

// TestThePlacerChoosesAsAFullScanWould: the placer keeps its candidates in
// order of preference and filters them in that order until one fits; on
// random clusters and random pods, with pods of the cluster removed and
// the static filters changed between placements, every placement equals
// the full scan's (every
// candidate filtered, the best by score and then by position).
func TestThePlacerChoosesAsAFullScanWould(t *testing.T) {
	for seed := int64(1); seed <= 400; seed++ {
		r := rand.New(rand.NewSource(seed))
		objs := randomCluster(r)
		s, err := NewSnapshot(objs)
		if err != nil {
			t.Fatal(err)
		}
		pod := randomPod(r, "incoming", objs.Nodes, false)
		pruned, err := s.newPlacer(pod, nil)
		if err != nil {
			continue // a selector the engine refuses; not the placer's concern
		}
		full, err := s.newPlacer(pod, nil)
		if err != nil {
			t.Fatal(err)
		}
		var bound []podID
		for id, pi := range s.pods {
			if pi != nil && pi.node != noNode {
				bound = append(bound, podID(id))
			}
		}
		for k := range 1 + r.Intn(8) {
			// Now and then a pod of the cluster goes away first, as old
			// pods do in a rollout: the node it leaves moves in the order.
			if len(bound) > 0 && r.Intn(3) == 0 {
				id := bound[r.Intn(len(bound))]
				bound = slices.DeleteFunc(bound, func(b podID) bool { return b == id })
				pruned.remove(id)
				full.remove(id)
			}
			// Now and then the static filters change, as a StatefulSet's
			// next pod brings other claims: the candidates are set again.
			if n := len(full.e.order); n > 0 && r.Intn(4) == 0 {
				i := r.Intn(n)
				for _, p := range []*placer{pruned, full} {
					if p.e.volumeReason[i] == 0 {
						p.e.volumeReason[i] = p.e.code(ReasonVolumeZone)
					} else {
						p.e.volumeReason[i] = 0
					}
					p.e.resetCandidates()
				}
			}
			want := fullScan(full)
			if got := pruned.place(pod); got != want {
				t.Fatalf("seed %d, placement %d: placed at %d, the full scan at %d", seed, k, got, want)
			}
			if want >= 0 {
				full.e.simulateBind(pod, full.antiTerms, full.req, want)
				full.own[want]++
			}
		}
	}
}

// fullScan is the placement every candidate is filtered for.
func fullScan(p *placer) int {
	best := -1
	for _, i := range p.e.candidates {
		if p.e.fits(i) && (best < 0 || p.better(i, best)) {
			best = i
		}
	}
	return best
}
