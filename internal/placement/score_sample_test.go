package placement

import (
	"testing"

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
