package schedulerfidelity

import (
	"sync"
	"testing"
)

var (
	fuzzScheduler     *scheduler
	fuzzSchedulerErr  error
	fuzzSchedulerOnce sync.Once
)

// FuzzFidelity compares the engine with the scheduler's plugins on
// scenarios drawn from fuzzed seeds; a node-set disagreement fails with the
// shrunk scenario. `make fuzz-fidelity FUZZTIME=10m` runs it.
func FuzzFidelity(f *testing.F) {
	for _, seed := range []uint64{1, 2, 3, 42, 1 << 40} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		fuzzSchedulerOnce.Do(func() { fuzzScheduler, fuzzSchedulerErr = newScheduler(make(chan struct{})) })
		if fuzzSchedulerErr != nil {
			t.Fatal(fuzzSchedulerErr)
		}
		sc := generate(seed)
		c, err := compare(fuzzScheduler, sc)
		if err != nil {
			t.Fatal(err)
		}
		if !c.sameNodes() {
			t.Fatalf("seed %d: %s\nshrunk: %s", seed, c, shrink(fuzzScheduler, sc))
		}
	})
}
