package placement

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/utils/ptr"
)

// The scheduler's numFeasibleNodesToFind: every node below 100, the
// adaptive percentage above (50 % less 1 % per 125 nodes, at least 5 %),
// never fewer than 100; a profile's percentage replaces the adaptive one.
func TestFeasibleNodesToFindIsTheSchedulers(t *testing.T) {
	for _, tc := range []struct {
		all, want  int
		percentage *int32
	}{
		{all: 50, want: 50},
		{all: 99, want: 99},
		{all: 100, want: 100},
		{all: 200, want: 100},    // 48 % is 96, raised to 100
		{all: 1000, want: 420},   // 42 %
		{all: 5000, want: 500},   // 10 %
		{all: 6000, want: 300},   // 2 %, raised to 5 %
		{all: 20000, want: 1000}, // 5 %
		{all: 1000, want: 300, percentage: ptr.To[int32](30)},
		{all: 1000, want: 100, percentage: ptr.To[int32](1)},
		{all: 50, want: 50, percentage: ptr.To[int32](10)},
	} {
		p := DefaultProfile()
		p.PercentageOfNodesToScore = tc.percentage
		if got := p.feasibleNodesToFind(tc.all); got != tc.want {
			t.Errorf("%d nodes, percentage %v: %d, want %d", tc.all, tc.percentage, got, tc.want)
		}
	}
}

// Above 100 nodes the scheduler picks the best of a sample: every node
// that can top some sample is a possible landing, and their zone is said
// when they share one.
func TestASampledLandingNamesEveryPossibleNode(t *testing.T) {
	// busy nodes of zone-a carry loads in groups of 15 (4, 8, ... CPUs of
	// 100), the others of zone-b are empty.
	cluster := func(busy, empty int) *Snapshot {
		var objs Objects
		for i := range busy + empty {
			z := "zone-b"
			if i < busy {
				z = "zone-a"
			}
			name := fmt.Sprintf("n%03d", i)
			objs.Nodes = append(objs.Nodes, mkNode(name, label(corev1.LabelTopologyZone, z), alloc("100", "800Gi", "110")))
			if i < busy {
				objs.Pods = append(objs.Pods, mkPod("other", "busy-"+name, on(name), requests(fmt.Sprint(4*(1+i/15)), "1Gi")))
			}
		}
		s, err := NewSnapshot(objs)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	pod := mkPod("ns", "web", requests("100m", "64Mi"))
	for _, tc := range []struct {
		name        string
		busy, empty int
		possible    int
		zone        string
	}{
		// 200 nodes: samples of 100 (48 %, at least 100). The 50 empty
		// nodes top any sample; a busy node of load group g tops one when
		// 99 others score no higher: its 14 peers and the 15 of each
		// heavier group, so groups 0 to 3.
		{"over both zones", 150, 50, 50 + 4*15, ""},
		// The 50 busy nodes have at most 49 below them: only the empty
		// ones of zone-b can be picked.
		{"one zone", 50, 150, 150, "zone-b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := cluster(tc.busy, tc.empty).Land(pod)
			if err != nil {
				t.Fatal(err)
			}
			if !l.Sampled {
				t.Fatal("200 feasible nodes, 100 sampled: not said to be sampled")
			}
			if len(l.Possible) != tc.possible || l.Zone != tc.zone {
				t.Errorf("%d possible nodes in zone %q, want %d in %q: %v", len(l.Possible), l.Zone, tc.possible, tc.zone, l.Possible)
			}
		})
	}
	if l, _ := cluster(40, 40).Land(pod); l.Sampled || l.Possible != nil {
		t.Errorf("80 nodes are all scored, got sampled %v, possible %v", l.Sampled, l.Possible)
	}
}
