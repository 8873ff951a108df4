// Package schedulerfidelity compares the placement engine with
// kube-scheduler's own PreFilter and Filter plugins, run in this process
// with the default profile, on generated scenarios: the nodes a pending pod
// may go to, and the scheduler's message when it may go nowhere.
package schedulerfidelity

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/placement-guard/placement-guard/internal/placement"
)

// engineVerdict asks the placement engine about the scenario's pending pod.
func engineVerdict(sc *scenario) (verdict, error) {
	s, err := sc.snapshot()
	if err != nil {
		return verdict{}, err
	}
	v, err := s.Schedule(sc.pending)
	if err != nil {
		return verdict{}, err
	}
	out := verdict{nodes: slices.Clone(v.Nodes)}
	slices.Sort(out.nodes)
	if !v.Schedulable {
		out.message = v.Message
	}
	return out, nil
}

// filterReasons are the reasons of the default profile's filters (one per
// way a filter refuses a node) that the generator must keep reaching: a
// change to it that stops producing one would leave that filter unchecked.
var filterReasons = []string{
	"node(s) were unschedulable",
	"untolerated taint",
	"didn't match Pod's node affinity/selector",
	"didn't have free ports",
	"Insufficient cpu",
	"Too many pods",
	placement.ReasonDiskConflict,
	placement.ReasonReadWriteOncePod,
	placement.ReasonMaxVolumeCount,
	"didn't find available persistent volumes to bind",
	placement.ReasonNotEnoughSpace,
	placement.ReasonVolumeNodeAffinity,
	"had no available volume zone",
	"pod has unbound immediate PersistentVolumeClaims",
	"didn't match pod topology spread constraints",
	"didn't match pod anti-affinity rules",
	"didn't satisfy existing pods anti-affinity rules",
	"didn't match pod affinity rules",
}

// comparison is one scenario's two verdicts.
type comparison struct {
	scheduler, engine verdict
}

func (c comparison) sameNodes() bool   { return slices.Equal(c.scheduler.nodes, c.engine.nodes) }
func (c comparison) sameMessage() bool { return c.scheduler.message == c.engine.message }

func (c comparison) String() string {
	return fmt.Sprintf("kube-scheduler allows %v (%q); the engine allows %v (%q)",
		c.scheduler.nodes, c.scheduler.message, c.engine.nodes, c.engine.message)
}

func compare(s *scheduler, sc *scenario) (comparison, error) {
	want, err := s.decide(sc)
	if err != nil {
		return comparison{}, fmt.Errorf("seed %d: kube-scheduler: %w", sc.seed, err)
	}
	got, err := engineVerdict(sc)
	if err != nil {
		return comparison{}, fmt.Errorf("seed %d: the engine: %w", sc.seed, err)
	}
	return comparison{scheduler: want, engine: got}, nil
}

// TestEngineAgreesWithSchedulerPlugins runs PLACEMENT_GUARD_FIDELITY_CASES
// scenarios (20,000 by default) from PLACEMENT_GUARD_FIDELITY_SEED (1 by
// default). Every node-set disagreement fails, shrunk to a minimal
// scenario; messages must agree on at least 99 % of the scenarios.
func TestEngineAgreesWithSchedulerPlugins(t *testing.T) {
	cases, first := settings(t)
	results, err := compareAll(t.Context().Done(), uint64(first), cases)
	if err != nil {
		t.Fatal(err)
	}
	nodeAgreed, msgAgreed, schedulable, failed := 0, 0, 0, 0
	var firstMessages []string
	seen := map[string]int{}
	for k, c := range results {
		seed := uint64(first + k)
		for _, r := range filterReasons {
			if strings.Contains(c.scheduler.message, r) {
				seen[r]++
			}
		}
		if len(c.scheduler.nodes) > 0 {
			schedulable++
		}
		if c.sameNodes() {
			nodeAgreed++
		} else if failed++; failed <= 5 {
			s, err := newScheduler(t.Context().Done())
			if err != nil {
				t.Fatal(err)
			}
			t.Errorf("seed %d: %s\nshrunk: %s", seed, c, shrink(s, generate(seed)))
		}
		if c.sameMessage() {
			msgAgreed++
		} else if len(firstMessages) < 5 {
			firstMessages = append(firstMessages, fmt.Sprintf("seed %d: %s", seed, c))
		}
	}
	t.Logf("%d scenarios from seed %d: node sets agreed on %d, messages on %d (%.2f %%); %d schedulable",
		cases, first, nodeAgreed, msgAgreed, 100*float64(msgAgreed)/float64(cases), schedulable)
	for _, m := range firstMessages {
		t.Logf("message disagreement: %s", m)
	}
	if float64(msgAgreed) < 0.99*float64(cases) {
		t.Errorf("messages agreed on %d of %d scenarios, under 99 %%", msgAgreed, cases)
	}
	for _, r := range filterReasons {
		t.Logf("%6d scenarios where kube-scheduler refused nodes with %q", seen[r], r)
		if cases >= 2000 && seen[r] == 0 {
			t.Errorf("no scenario exercised %q: the generator no longer covers that filter", r)
		}
	}
	if cases >= 100 && (schedulable == 0 || schedulable == cases) {
		t.Errorf("the generator must produce both schedulable and unschedulable pods (%d of %d schedulable)", schedulable, cases)
	}
}

// compareAll compares the scenarios of seeds first to first+cases-1, on
// as many workers as there are CPUs, each with its own scheduler, and
// returns the comparisons in seed order.
func compareAll(stop <-chan struct{}, first uint64, cases int) ([]comparison, error) {
	results := make([]comparison, cases)
	workers := runtime.GOMAXPROCS(0)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			s, err := newScheduler(stop)
			if err != nil {
				errs[w] = err
				return
			}
			for k := w; k < cases; k += workers {
				if results[k], err = compare(s, generate(first+uint64(k))); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return results, errors.Join(errs...)
}

// settings are the number of scenarios (PLACEMENT_GUARD_FIDELITY_CASES,
// 20,000 by default, at most 500 with -short) and the first seed
// (PLACEMENT_GUARD_FIDELITY_SEED, 1 by default).
func settings(t *testing.T) (cases, first int) {
	cases, first = 20000, 1
	for name, into := range map[string]*int{"PLACEMENT_GUARD_FIDELITY_CASES": &cases, "PLACEMENT_GUARD_FIDELITY_SEED": &first} {
		if v, ok := os.LookupEnv(name); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s=%q: %v", name, v, err)
			}
			*into = n
		}
	}
	if testing.Short() {
		cases = min(cases, 500)
	}
	return cases, first
}
