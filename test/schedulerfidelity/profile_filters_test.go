package schedulerfidelity

import (
	"fmt"
	"slices"
	"testing"

	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/schedulerprofile"
)

// filtersOff is a profile that turns filters off: some at the filter
// point only (their scores stay), TaintToleration everywhere.
const filtersOff = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- plugins:
    filter:
      disabled: [{name: NodePorts}, {name: PodTopologySpread}, {name: VolumeZone}, {name: NodeResourcesFit}]
    multiPoint:
      disabled: [{name: TaintToleration}]
`

// TestEngineFiltersAsAProfileWithFiltersOff compares, on a quarter of the
// filter scenarios, where the pending pod may go and where it lands under
// a profile that turns filters off, each side reading the configuration
// its own way: the node sets must be equal everywhere, the messages and
// best sets too.
func TestEngineFiltersAsAProfileWithFiltersOff(t *testing.T) {
	cases, first := settings(t)
	cases = max(cases/4, 1)
	profile, err := schedulerprofile.Parse([]byte(filtersOff), "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := newProfileScheduler(t.Context().Done(), scoringProfile{name: "filters-off", config: filtersOff, engine: profile})
	if err != nil {
		t.Fatal(err)
	}
	nodesAgreed, messagesAgreed, placed, bestAgreed, differs := 0, 0, 0, 0, 0
	shown := 0
	for k := range cases {
		sc := generate(uint64(first + k))
		want, err := s.land(sc)
		if err != nil {
			t.Fatalf("seed %d: kube-scheduler: %v", sc.seed, err)
		}
		got, best, err := engineUnder(sc, profile)
		if err != nil {
			t.Fatalf("seed %d: the engine: %v", sc.seed, err)
		}
		def, err := engineVerdict(sc)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(def.nodes, got.nodes) {
			differs++
		}
		if slices.Equal(want.nodes, got.nodes) {
			nodesAgreed++
		} else if shown++; shown <= 5 {
			t.Errorf("seed %d: kube-scheduler allows %v (%q); the engine %v (%q)", sc.seed, want.nodes, want.message, got.nodes, got.message)
		}
		if want.message == got.message {
			messagesAgreed++
		}
		if len(want.best) > 0 {
			placed++
			if slices.Equal(want.best, best) {
				bestAgreed++
			} else if shown++; shown <= 5 {
				t.Logf("seed %d: kube-scheduler's best %v; the engine's %v", sc.seed, want.best, best)
			}
		}
	}
	t.Logf("%d scenarios: node sets agreed on %d, messages on %d, best sets on %d of %d placed; the profile changed the nodes allowed in %d",
		cases, nodesAgreed, messagesAgreed, bestAgreed, placed, differs)
	if nodesAgreed != cases {
		t.Errorf("node sets agreed on %d of %d", nodesAgreed, cases)
	}
	if messagesAgreed != cases || bestAgreed != placed {
		t.Errorf("messages agreed on %d of %d, best sets on %d of %d", messagesAgreed, cases, bestAgreed, placed)
	}
	if cases >= 500 && differs < cases/10 {
		t.Errorf("the profile changed the allowed nodes in only %d of %d scenarios: the test no longer shows the filters off", differs, cases)
	}
}

// engineUnder is the engine's verdict and landing under profile.
func engineUnder(sc *scenario, profile *placement.Profiles) (verdict, []string, error) {
	s, err := sc.snapshot()
	if err != nil {
		return verdict{}, nil, err
	}
	s.SetProfiles(profile)
	v, err := s.Schedule(sc.pending)
	if err != nil {
		return verdict{}, nil, err
	}
	out := verdict{nodes: slices.Clone(v.Nodes)}
	slices.Sort(out.nodes)
	if !v.Schedulable {
		out.message = v.Message
	}
	l, err := s.Land(sc.pending)
	if err != nil {
		return verdict{}, nil, fmt.Errorf("land: %w", err)
	}
	best := slices.Clone(l.Best)
	slices.Sort(best)
	return out, best, nil
}
