package planning

import (
	"testing"
	"time"
)

// The soonest timer wins; 0 is no timer, and none at all is 0.
func TestShortestIsTheSoonestTimer(t *testing.T) {
	for _, tc := range []struct {
		timers []time.Duration
		want   time.Duration
	}{
		{nil, 0},
		{[]time.Duration{0, 0}, 0},
		{[]time.Duration{0, 3 * time.Second}, 3 * time.Second},
		{[]time.Duration{5 * time.Second, 0, 2 * time.Second}, 2 * time.Second},
		{[]time.Duration{time.Minute, 30 * time.Second, 0}, 30 * time.Second},
	} {
		if got := Shortest(tc.timers...); got != tc.want {
			t.Errorf("Shortest(%v) = %v, want %v", tc.timers, got, tc.want)
		}
	}
}
