package schedulerprofile

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/placement-guard/placement-guard/internal/placement"
)

const header = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"

// A configuration is read as kube-scheduler merges it into its defaults:
// what it leaves out is the default profile's.
func TestAProfileIsTheDefaultsWithWhatTheConfigurationChanges(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, scheduler string
		check                 func(t *testing.T, p *placement.Profile)
	}{
		{name: "no profiles", yaml: header, check: func(t *testing.T, p *placement.Profile) {
			want := placement.DefaultProfile()
			if p.Name != want.Name || len(p.Weights) != len(want.Weights) || p.Fit.Type != placement.LeastAllocated || !p.SystemDefaulted {
				t.Errorf("got %+v, want the default profile", p)
			}
		}},
		{name: "bin-packing", yaml: header + `profiles:
- pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources: [{name: cpu, weight: 3}, {name: memory}]
`, check: func(t *testing.T, p *placement.Profile) {
			if p.Fit.Type != placement.MostAllocated || len(p.Fit.Resources) != 2 || p.Fit.Resources[0].Weight != 3 || p.Fit.Resources[1].Weight != 1 {
				t.Errorf("fit %+v, want MostAllocated over cpu 3, memory 1", p.Fit)
			}
		}},
		{name: "weights, a plugin off, a second profile", scheduler: "packer", yaml: header + `percentageOfNodesToScore: 20
profiles:
- schedulerName: default-scheduler
- schedulerName: packer
  plugins:
    score:
      enabled: [{name: TaintToleration, weight: 7}, {name: PodTopologySpread}]
      disabled: [{name: ImageLocality}]
  pluginConfig:
  - name: InterPodAffinity
    args: {hardPodAffinityWeight: 9}
  - name: PodTopologySpread
    args:
      defaultingType: List
      defaultConstraints: [{maxSkew: 2, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}]
`, check: func(t *testing.T, p *placement.Profile) {
			if p.Name != "packer" || p.Weights[placement.PluginTaintToleration] != 7 || p.Weights[placement.PluginPodTopologySpread] != 2 {
				t.Errorf("weights %v, want TaintToleration 7 and PodTopologySpread's default 2", p.Weights)
			}
			if _, on := p.Weights[placement.PluginImageLocality]; on {
				t.Error("ImageLocality scores though the profile turned it off")
			}
			if p.HardPodAffinityWeight != 9 || p.SystemDefaulted || len(p.DefaultSpread) != 1 || p.DefaultSpread[0].MaxSkew != 2 {
				t.Errorf("hard weight %d, defaults %v (system %v)", p.HardPodAffinityWeight, p.DefaultSpread, p.SystemDefaulted)
			}
			if p.PercentageOfNodesToScore == nil || *p.PercentageOfNodesToScore != 20 {
				t.Errorf("percentageOfNodesToScore %v, want the configuration's 20", p.PercentageOfNodesToScore)
			}
		}},
		{name: "filters off", yaml: header + `profiles:
- plugins:
    filter:
      disabled: [{name: NodePorts}, {name: PodTopologySpread}]
    multiPoint:
      disabled: [{name: TaintToleration}]
`, check: func(t *testing.T, p *placement.Profile) {
			for _, f := range []string{"NodePorts", "PodTopologySpread", "TaintToleration"} {
				if !p.DisabledFilters[f] {
					t.Errorf("filter %s runs though the profile turns it off: %v", f, p.DisabledFilters)
				}
			}
			if _, on := p.Weights[placement.PluginTaintToleration]; on {
				t.Error("TaintToleration scores though multiPoint turned it off")
			}
			if p.Weights[placement.PluginPodTopologySpread] != 2 {
				t.Error("turning PodTopologySpread's filter off turned its score off too")
			}
		}},
		{name: "requested to capacity ratio", yaml: header + `profiles:
- pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: RequestedToCapacityRatio
        requestedToCapacityRatio:
          shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]
`, check: func(t *testing.T, p *placement.Profile) {
			if p.Fit.Type != placement.RequestedToCapacityRatio || len(p.Fit.Shape) != 2 || p.Fit.Resources[0].Name != corev1.ResourceCPU {
				t.Errorf("fit %+v", p.Fit)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps, err := Parse([]byte(tc.yaml), tc.scheduler)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, ps.Fallback())
		})
	}
}

// What the engine cannot predict as the scheduler would is refused with
// words that name it.
func TestWhatCannotBePredictedIsRefusedByName(t *testing.T) {
	for _, tc := range []struct{ name, yaml, scheduler, says string }{
		{"not YAML", "profiles: [", "", "does not parse"},
		{"a field that does not exist", header + "profiles:\n- schedulerName: default-scheduler\n  weights: 3\n", "", `unknown field "weights"`},
		{"another kind", "apiVersion: v1\nkind: ConfigMap\n", "", "want kubescheduler.config.k8s.io/v1"},
		{"an unknown plugin", header + "profiles:\n- plugins:\n    score:\n      enabled: [{name: NetworkAware}]\n", "", "NetworkAware"},
		{"a negative weight", header + "profiles:\n- plugins:\n    score:\n      enabled: [{name: NodeAffinity, weight: -2}]\n", "", "weight -2 is out of range"},
		{"a resource weight out of range", header + "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args: {scoringStrategy: {type: LeastAllocated, resources: [{name: cpu, weight: 101}]}}\n", "", "weight 101 is outside 1 to 100"},
		{"an unknown strategy", header + "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args: {scoringStrategy: {type: Cheapest}}\n", "", `"Cheapest"`},
		{"a preFilter off", header + "profiles:\n- plugins:\n    preFilter:\n      disabled: [{name: PodTopologySpread}]\n", "", "preFilter of PodTopologySpread off"},
		{"an extender", header + "extenders:\n- urlPrefix: http://x\n  filterVerb: filter\n", "", "extender"},
		{"a profile it does not have", header + "profiles:\n- schedulerName: a\n- schedulerName: b\n", "c", `no profile "c"`},
		{"a hard default constraint", header + "profiles:\n- pluginConfig:\n  - name: PodTopologySpread\n    args: {defaultingType: List, defaultConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]}\n", "", "DoNotSchedule"},
		{"added required affinity", header + "profiles:\n- pluginConfig:\n  - name: NodeAffinity\n    args: {addedAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: a, operator: Exists}]}]}}}\n", "", "addedAffinity's required terms"},
		{"a volume shape that falls back", header + "profiles:\n- pluginConfig:\n  - name: VolumeBinding\n    args: {shape: [{utilization: 50, score: 2}, {utilization: 10, score: 8}]}\n", "", "utilization must rise"},
		{"a percentage out of range", header + "percentageOfNodesToScore: 140\n", "", "140"},
		{"two profiles of one name", header + "profiles:\n- schedulerName: a\n- schedulerName: a\n", "a", `two profiles named "a"`},
		{"the fallback cannot be predicted", header + twoProfiles + gpuProfile, "gpu", "NetworkAware"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), tc.scheduler)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err %v, want one that says %q", err, tc.says)
			}
		})
	}
}

const twoProfiles = `profiles:
- schedulerName: default-scheduler
- schedulerName: packer
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: MostAllocated}}
`

const gpuProfile = `- schedulerName: gpu
  plugins:
    score:
      enabled: [{name: NetworkAware}]
`

// A configuration is read whole: each pod is predicted with the profile
// its schedulerName names, the fallback (--scheduler-name) is only for a
// pod naming none, and a profile the configuration does not describe is
// not silently the fallback's.
func TestEveryProfileOfAConfigurationIsRead(t *testing.T) {
	for _, fallback := range []string{"", "packer"} {
		ps, err := Parse([]byte(header+twoProfiles), fallback)
		if err != nil {
			t.Fatal(err)
		}
		if got := ps.Names(); strings.Join(got, ",") != "default-scheduler,packer" {
			t.Errorf("profiles %v", got)
		}
		for name, fit := range map[string]string{"default-scheduler": placement.LeastAllocated, "packer": placement.MostAllocated} {
			p, described := ps.Of(name)
			if !described || p.Name != name || p.Fit.Type != fit {
				t.Errorf("fallback %q: pods of %s predicted with %s (%s), described %v", fallback, name, p.Name, p.Fit.Type, described)
			}
		}
		want := fallback
		if want == "" {
			want = corev1.DefaultSchedulerName
		}
		if p, described := ps.Of(""); !described || p.Name != want {
			t.Errorf("fallback %q: a pod naming no scheduler predicted with %s", fallback, p.Name)
		}
		if _, described := ps.Of("batch"); described {
			t.Errorf("fallback %q: an undescribed scheduler is said to be described", fallback)
		}
	}
}

// A profile the engine cannot predict stops the manager only when it is
// the fallback; otherwise its pods are said to be unpredicted, with why.
func TestAnUnpredictableProfileIsKeptWithWhy(t *testing.T) {
	ps, err := Parse([]byte(header+twoProfiles+gpuProfile), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, described := ps.Of("gpu"); described {
		t.Error("profile gpu, which runs an unknown plugin, is said to be predicted")
	}
	if names := ps.UnpredictableNames(); len(names) != 1 || names[0] != "gpu" {
		t.Errorf("unpredictable profiles %v", names)
	}
	if why := ps.Unpredictable("gpu"); !strings.Contains(why, "NetworkAware") {
		t.Errorf("why gpu cannot be predicted: %q", why)
	}
	if p, described := ps.Of("packer"); !described || p.Fit.Type != placement.MostAllocated {
		t.Error("the other profiles are read all the same")
	}
}
