package schedulerfidelity

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"

	"github.com/placement-guard/placement-guard/internal/placement"
)

// scoringProfile is one profile as each side configures it.
type scoringProfile struct {
	name string
	// scheduler changes kube-scheduler's default profile into this one.
	scheduler func(*config.KubeSchedulerProfile)
	engine    *placement.Profile
}

// scoringProfiles are the default profile, bin-packing (MostAllocated),
// and one with custom weights everywhere.
func scoringProfiles() []scoringProfile {
	most := placement.DefaultProfile()
	most.Name, most.Fit.Type = "most-allocated", placement.MostAllocated
	custom := placement.DefaultProfile()
	custom.Name = "custom-weights"
	custom.Weights = map[string]int64{
		placement.PluginTaintToleration: 1, placement.PluginNodeAffinity: 5, placement.PluginNodeResourcesFit: 3,
		placement.PluginPodTopologySpread: 7, placement.PluginInterPodAffinity: 4, placement.PluginBalancedAllocation: 2,
		placement.PluginImageLocality: 3, placement.PluginVolumeBinding: 1,
	}
	custom.Fit.Resources = []placement.ResourceWeight{{Name: corev1.ResourceCPU, Weight: 3}, {Name: corev1.ResourceMemory, Weight: 1}}
	custom.HardPodAffinityWeight = 5
	return []scoringProfile{
		{name: "default", scheduler: func(*config.KubeSchedulerProfile) {}, engine: placement.DefaultProfile()},
		{name: most.Name, engine: most, scheduler: func(p *config.KubeSchedulerProfile) {
			fitArgs(p).ScoringStrategy.Type = config.MostAllocated
		}},
		{name: custom.Name, engine: custom, scheduler: func(p *config.KubeSchedulerProfile) {
			for k := range p.Plugins.MultiPoint.Enabled {
				if w, ok := custom.Weights[p.Plugins.MultiPoint.Enabled[k].Name]; ok {
					p.Plugins.MultiPoint.Enabled[k].Weight = int32(w)
				}
			}
			fitArgs(p).ScoringStrategy.Resources = []config.ResourceSpec{{Name: "cpu", Weight: 3}, {Name: "memory", Weight: 1}}
			for _, pc := range p.PluginConfig {
				if a, ok := pc.Args.(*config.InterPodAffinityArgs); ok {
					a.HardPodAffinityWeight = 5
				}
			}
		}},
	}
}

func fitArgs(p *config.KubeSchedulerProfile) *config.NodeResourcesFitArgs {
	for _, pc := range p.PluginConfig {
		if a, ok := pc.Args.(*config.NodeResourcesFitArgs); ok {
			return a
		}
	}
	panic("the default profile configures NodeResourcesFit")
}

// newProfileScheduler is kube-scheduler running sp's profile.
func newProfileScheduler(stop <-chan struct{}, sp scoringProfile) (*scheduler, error) {
	cfg, err := latest.Default()
	if err != nil {
		return nil, err
	}
	profile := cfg.Profiles[0].DeepCopy()
	sp.scheduler(profile)
	return newSchedulerWith(stop, profile), nil
}

// engineLanding asks the engine where the scenario's pending pod lands.
func engineLanding(sc *scenario, profile *placement.Profile) ([]string, error) {
	s, err := placement.NewSnapshot(placement.Objects{
		Nodes: sc.nodes, Pods: sc.existing, Namespaces: sc.namespaces,
		Claims: sc.claims, Volumes: sc.volumes, StorageClasses: sc.storageClasses,
		CSINodes: sc.csiNodes, Attachments: sc.attachments, CSIDrivers: sc.csiDrivers, Capacities: sc.capacities,
		Services: sc.services, ReplicaSets: sc.replicaSets, StatefulSets: sc.statefulSets,
	})
	if err != nil {
		return nil, err
	}
	if err := s.SetProfile(profile); err != nil {
		return nil, err
	}
	l, err := s.Land(sc.pending)
	if err != nil {
		return nil, err
	}
	best := slices.Clone(l.Best)
	slices.Sort(best)
	return best, nil
}

// landing is one scenario's two answers.
type landing struct {
	seed              uint64
	feasible          []string
	scheduler, engine []string
}

// TestEngineScoresAsScheduler compares, for each profile, the nodes of the
// best total score on PLACEMENT_GUARD_FIDELITY_CASES scoring scenarios
// (20,000 by default): the engine's best set must equal kube-scheduler's
// on at least 99.5 % of the scenarios with a node to place on.
func TestEngineScoresAsScheduler(t *testing.T) {
	cases, first := settings(t)
	for _, sp := range scoringProfiles() {
		t.Run(sp.name, func(t *testing.T) {
			results, err := landAll(t.Context().Done(), sp, uint64(first), cases)
			if err != nil {
				t.Fatal(err)
			}
			placed, agreed, several := 0, 0, 0
			var shown int
			for _, l := range results {
				if len(l.scheduler) == 0 {
					continue
				}
				placed++
				if len(l.feasible) > 1 {
					several++
				}
				if slices.Equal(l.scheduler, l.engine) {
					agreed++
				} else if shown++; shown <= 8 {
					t.Logf("seed %d: feasible %v: kube-scheduler's best %v, the engine's %v", l.seed, l.feasible, l.scheduler, l.engine)
				}
			}
			t.Logf("profile %s: %d scenarios, %d placed (%d with several feasible nodes): best sets agreed on %d (%.2f %%)",
				sp.name, cases, placed, several, agreed, 100*float64(agreed)/float64(max(placed, 1)))
			if float64(agreed) < 0.995*float64(placed) {
				t.Errorf("profile %s: best sets agreed on %d of %d, under 99.5 %%", sp.name, agreed, placed)
			}
			if cases >= 500 && several < placed/2 {
				t.Errorf("only %d of %d placed scenarios had several feasible nodes: the generator no longer makes the scores decide", several, placed)
			}
		})
	}
}

func landAll(stop <-chan struct{}, sp scoringProfile, first uint64, cases int) ([]landing, error) {
	results := make([]landing, cases)
	workers := runtime.GOMAXPROCS(0)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			s, err := newProfileScheduler(stop, sp)
			if err != nil {
				errs[w] = err
				return
			}
			for k := w; k < cases; k += workers {
				sc := generateScoring(first + uint64(k))
				v, err := s.land(sc)
				if err != nil {
					errs[w] = fmt.Errorf("seed %d: kube-scheduler: %w", sc.seed, err)
					return
				}
				best, err := engineLanding(sc, sp.engine)
				if err != nil {
					errs[w] = fmt.Errorf("seed %d: the engine: %w", sc.seed, err)
					return
				}
				results[k] = landing{seed: sc.seed, feasible: v.nodes, scheduler: v.best, engine: best}
			}
		})
	}
	wg.Wait()
	return results, errors.Join(errs...)
}
