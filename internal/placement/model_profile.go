package placement

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// The score plugins of kube-scheduler the engine reproduces, by the names a
// KubeSchedulerConfiguration gives them.
const (
	PluginNodeResourcesFit         = "NodeResourcesFit"
	PluginBalancedAllocation       = "NodeResourcesBalancedAllocation"
	PluginImageLocality            = "ImageLocality"
	PluginInterPodAffinity         = "InterPodAffinity"
	PluginNodeAffinity             = "NodeAffinity"
	PluginPodTopologySpread        = "PodTopologySpread"
	PluginTaintToleration          = "TaintToleration"
	PluginVolumeBinding            = "VolumeBinding"
	maxNodeScore             int64 = 100
)

// The scoring strategies of NodeResourcesFit.
const (
	LeastAllocated           = "LeastAllocated"
	MostAllocated            = "MostAllocated"
	RequestedToCapacityRatio = "RequestedToCapacityRatio"
)

// Profile is the scheduler profile whose choices the engine predicts: the
// score plugins it runs with their weights and arguments, and the filters
// it leaves out. DefaultProfile is kube-scheduler's default profile; a
// cluster's own comes from its KubeSchedulerConfiguration
// (internal/schedulerprofile reads one).
type Profile struct {
	// Name is the profile's schedulerName, for the answers that say which
	// profile they assumed.
	Name string
	// Weights are the enabled score plugins' weights; a plugin absent
	// does not score.
	Weights map[string]int64
	// Fit is NodeResourcesFit's scoring strategy.
	Fit FitScoring
	// Balanced are the resources NodeResourcesBalancedAllocation weighs.
	Balanced []ResourceWeight
	// HardPodAffinityWeight is what an existing pod's required affinity
	// term that selects the incoming pod adds to its domain (InterPodAffinity).
	HardPodAffinityWeight int64
	// IgnorePreferredTermsOfExistingPods leaves existing pods' preferred
	// terms out of InterPodAffinity's score.
	IgnorePreferredTermsOfExistingPods bool
	// AddedAffinity is NodeAffinity's addedAffinity: required terms every
	// pod must also meet, preferred terms every pod also scores.
	AddedAffinity *corev1.NodeAffinity
	// DefaultSpread are PodTopologySpread's default constraints, applied
	// to a pod without constraints of its own; SystemDefaulted says they
	// are the system's (hostname 3, zone 5, ScheduleAnyway), under which a
	// node without a topology label is not left out of scoring.
	DefaultSpread   []corev1.TopologySpreadConstraint
	SystemDefaulted bool
	// VolumeShape is VolumeBinding's utilization-to-score shape
	// (StorageCapacityScoring); empty when it does not score.
	VolumeShape []ShapePoint
	// PercentageOfNodesToScore is the profile's, or the configuration's,
	// when set; nil is the scheduler's adaptive default.
	PercentageOfNodesToScore *int32
	// DisabledFilters are the filter plugins (and SchedulingGates) the
	// profile turns off: the engine's filters skip them as the
	// scheduler's do.
	DisabledFilters map[string]bool
}

// The filter plugins a profile may turn off.
const (
	FilterSchedulingGates    = "SchedulingGates"
	FilterNodeUnschedulable  = "NodeUnschedulable"
	FilterNodeName           = "NodeName"
	FilterTaintToleration    = "TaintToleration"
	FilterNodeAffinity       = "NodeAffinity"
	FilterNodePorts          = "NodePorts"
	FilterNodeResourcesFit   = "NodeResourcesFit"
	FilterVolumeRestrictions = "VolumeRestrictions"
	FilterNodeVolumeLimits   = "NodeVolumeLimits"
	FilterVolumeBinding      = "VolumeBinding"
	FilterVolumeZone         = "VolumeZone"
	FilterPodTopologySpread  = "PodTopologySpread"
	FilterInterPodAffinity   = "InterPodAffinity"
	FilterDynamicResources   = "DynamicResources"
)

// Filters are the filter plugins the engine runs, as the default profile
// does.
var Filters = []string{
	FilterSchedulingGates, FilterNodeUnschedulable, FilterNodeName, FilterTaintToleration, FilterNodeAffinity, FilterNodePorts,
	FilterNodeResourcesFit, FilterVolumeRestrictions, FilterNodeVolumeLimits, FilterVolumeBinding, FilterVolumeZone,
	FilterPodTopologySpread, FilterInterPodAffinity, FilterDynamicResources,
}

// filters reports whether the profile runs the filter plugin.
func (p *Profile) filters(plugin string) bool { return !p.DisabledFilters[plugin] }

// FitScoring is NodeResourcesFit's scoringStrategy.
type FitScoring struct {
	Type      string
	Resources []ResourceWeight
	// Shape is RequestedToCapacityRatio's utilization-to-score points,
	// utilization ascending, scores 0 to 10.
	Shape []ShapePoint
}

// ResourceWeight is a resource a score weighs, and its weight.
type ResourceWeight struct {
	Name   corev1.ResourceName
	Weight int64
}

// ShapePoint is a point of RequestedToCapacityRatio's shape.
type ShapePoint struct {
	Utilization int64
	Score       int64
}

// DefaultProfile is kube-scheduler's default profile, "default-scheduler",
// as the v1 KubeSchedulerConfiguration's defaults configure it.
func DefaultProfile() *Profile {
	cpuMemory := []ResourceWeight{{Name: corev1.ResourceCPU, Weight: 1}, {Name: corev1.ResourceMemory, Weight: 1}}
	return &Profile{
		Name: corev1.DefaultSchedulerName,
		Weights: map[string]int64{
			PluginTaintToleration:    3,
			PluginNodeAffinity:       2,
			PluginNodeResourcesFit:   1,
			PluginPodTopologySpread:  2,
			PluginInterPodAffinity:   2,
			PluginBalancedAllocation: 1,
			PluginImageLocality:      1,
			PluginVolumeBinding:      1,
		},
		Fit:                   FitScoring{Type: LeastAllocated, Resources: cpuMemory},
		Balanced:              cpuMemory,
		HardPodAffinityWeight: 1,
		// The emptier, the better: StorageCapacityScoring's default.
		VolumeShape:     []ShapePoint{{Utilization: 0, Score: 10}, {Utilization: 100, Score: 0}},
		DefaultSpread:   SystemDefaultSpread(),
		SystemDefaulted: true,
	}
}

// SystemDefaultSpread are PodTopologySpread's system default constraints.
func SystemDefaultSpread() []corev1.TopologySpreadConstraint {
	return []corev1.TopologySpreadConstraint{
		{TopologyKey: corev1.LabelHostname, MaxSkew: 3, WhenUnsatisfiable: corev1.ScheduleAnyway},
		{TopologyKey: corev1.LabelTopologyZone, MaxSkew: 5, WhenUnsatisfiable: corev1.ScheduleAnyway},
	}
}

// Validate reports the first thing in p the engine cannot score as the
// scheduler would.
func (p *Profile) Validate() error {
	for name, w := range p.Weights {
		if w < 1 {
			return fmt.Errorf("profile %q: plugin %s: weight %d is not positive", p.Name, name, w)
		}
	}
	switch p.Fit.Type {
	case LeastAllocated, MostAllocated:
	case RequestedToCapacityRatio:
		if len(p.Fit.Shape) == 0 {
			return fmt.Errorf("profile %q: NodeResourcesFit: RequestedToCapacityRatio needs a shape", p.Name)
		}
	default:
		return fmt.Errorf("profile %q: NodeResourcesFit: unknown scoring strategy %q", p.Name, p.Fit.Type)
	}
	return nil
}

// weight is the weight of plugin, 0 when it does not score.
func (p *Profile) weight(plugin string) int64 { return p.Weights[plugin] }
