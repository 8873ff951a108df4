package placement

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestTheWalkFindsWhatCheckingEveryCandidateFinds: the walk passes over
// the nodes of domains a spread rejects without checking them. On random
// clusters above the scheduler's sampling threshold, with zones and
// regions (some nodes without either label), full nodes and a pod with
// one or two hard spreads, each placement of a rollout-long sequence
// finds the same feasible nodes, in the same order, and stops where
// checking every candidate from the same start stops.
func TestTheWalkFindsWhatCheckingEveryCandidateFinds(t *testing.T) {
	skipped := 0
	for seed := int64(1); seed <= 60; seed++ {
		r := rand.New(rand.NewSource(seed))
		zones, regions := 2+r.Intn(6), 1+r.Intn(3)
		var objs Objects
		for k := range 120 + r.Intn(300) {
			opts := []nodeOpt{}
			if r.Intn(20) > 0 {
				opts = append(opts, zone(fmt.Sprintf("z%d", r.Intn(zones))))
			}
			if r.Intn(20) > 0 {
				opts = append(opts, label("region", fmt.Sprintf("r%d", r.Intn(regions))))
			}
			if r.Intn(10) == 0 {
				opts = append(opts, alloc("1", "8Gi", "110"))
			}
			name := fmt.Sprintf("n%04d", k)
			objs.Nodes = append(objs.Nodes, mkNode(name, opts...))
			for j := range r.Intn(3) {
				objs.Pods = append(objs.Pods, mkPod("ns", fmt.Sprintf("%s-%d", name, j), on(name), withLabels("app", "web"), requests("500m", "1Gi")))
			}
		}
		sel := map[string]string{"app": "web"}
		opts := []podOpt{withLabels("app", "web"), requests("500m", "1Gi"), spread(corev1.LabelTopologyZone, int32(1+r.Intn(2)), sel)}
		if r.Intn(2) == 0 {
			opts = append(opts, spread("region", 1, sel))
		}
		pod := mkPod("ns", "incoming", opts...)
		s, err := NewSnapshot(objs)
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.newPlacer(nil, pod)
		if err != nil {
			t.Fatal(err)
		}
		for k := range 40 {
			cands := p.e.candidates
			want := p.sc.p.feasibleNodesToFind(len(p.e.order))
			start := p.next % len(cands)
			var every []int
			searched := 0
			for ; searched < len(cands) && len(every) < want; searched++ {
				if i := cands[(start+searched)%len(cands)]; p.e.nodeFits(i) {
					every = append(every, i)
				}
			}
			if p.allowedCandidates(cands) != nil {
				skipped++
			}
			i := p.choose()
			if !slices.Equal(p.feasible, every) || p.next != (start+searched)%len(cands) {
				t.Fatalf("seed %d, placement %d: the walk found %v and stopped before %d, checking every candidate %v before %d",
					seed, k, p.feasible, p.next, every, (start+searched)%len(cands))
			}
			if i < 0 {
				break
			}
			placed := pod.DeepCopy()
			placed.Name, placed.UID = fmt.Sprintf("placed-%d", k), types.UID(fmt.Sprintf("placed-%d-%d", seed, k))
			p.e.simulateBind(placed, p.antiTerms, p.req, i)
		}
	}
	if skipped < 500 {
		t.Fatalf("domains were passed over in only %d placements", skipped)
	}
}
