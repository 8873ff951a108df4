package schedulerprofile

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"

	"github.com/placement-guard/placement-guard/internal/placement"
)

// One profile of the configuration made the engine's: its plugins and
// their arguments merged into the default profile, as kube-scheduler
// merges them, refusing by name what the engine cannot predict.

// defaultFilters are the default profile's filter plugins (and
// SchedulingGates, which holds a pod before them); a profile may turn
// any off, and the engine's filters skip it too.
var defaultFilters = placement.Filters

// placementNeutral are default plugins that move no pod's landing node:
// the queue's order, preemption, binding and gang scheduling's waiting.
var placementNeutral = []string{"PrioritySort", "DefaultPreemption", "DefaultBinder", "NodeDeclaredFeatures", "GangScheduling", "DeferredPodScheduling", "PodGroupPodsCount", "TopologyAware"}

// fromProfile applies a profile's plugins and their arguments to the
// default profile.
func fromProfile(prof configv1.KubeSchedulerProfile) (*placement.Profile, error) {
	p := placement.DefaultProfile()
	p.PercentageOfNodesToScore = prof.PercentageOfNodesToScore
	if prof.PercentageOfNodesToScore != nil && *prof.PercentageOfNodesToScore == 0 {
		p.PercentageOfNodesToScore = nil
	}
	if err := checkPercentage(p.PercentageOfNodesToScore); err != nil {
		return nil, err
	}
	if prof.Plugins != nil {
		if err := applyPlugins(p, prof.Plugins); err != nil {
			return nil, err
		}
	}
	for _, pc := range prof.PluginConfig {
		if err := applyArgs(p, pc); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// applyPlugins enables and disables plugins as the scheduler merges a
// profile into its defaults: multiPoint first, then each extension
// point's own sets, a weight given at the score point winning.
func applyPlugins(p *placement.Profile, plugins *configv1.Plugins) error {
	filters := map[string]bool{}
	for _, f := range defaultFilters {
		filters[f] = true
	}
	defaults := maps.Clone(p.Weights)
	weights := p.Weights
	disable := func(set map[string]int64, flags map[string]bool, disabled []configv1.Plugin) {
		for _, d := range disabled {
			if d.Name == "*" {
				clear(set)
				clear(flags)
				continue
			}
			delete(set, d.Name)
			delete(flags, d.Name)
		}
	}
	enableScore := func(enabled []configv1.Plugin) error {
		for _, e := range enabled {
			if _, known := defaults[e.Name]; !known {
				if slices.Contains(defaultFilters, e.Name) || slices.Contains(placementNeutral, e.Name) {
					continue // not a score plugin, or it moves no pod
				}
				return fmt.Errorf("plugin %s is not one the engine scores with: its choices cannot be predicted", e.Name)
			}
			w := int64(1)
			if e.Weight != nil {
				if *e.Weight < 0 {
					return fmt.Errorf("plugin %s: weight %d is out of range (0 or more; 0 counts as 1)", e.Name, *e.Weight)
				}
				w = max(int64(*e.Weight), 1)
			} else if d, ok := defaults[e.Name]; ok {
				w = d
			}
			weights[e.Name] = w
		}
		return nil
	}
	enableFilters := func(enabled []configv1.Plugin) error {
		for _, e := range enabled {
			switch {
			case slices.Contains(defaultFilters, e.Name):
				filters[e.Name] = true
			case slices.Contains(placementNeutral, e.Name):
			default:
				if _, scores := defaults[e.Name]; !scores {
					return fmt.Errorf("plugin %s is not one the engine models: where it lets pods go cannot be predicted", e.Name)
				}
			}
		}
		return nil
	}
	disable(weights, filters, plugins.MultiPoint.Disabled)
	if err := enableFilters(plugins.MultiPoint.Enabled); err != nil {
		return err
	}
	if err := enableScore(plugins.MultiPoint.Enabled); err != nil {
		return err
	}
	if len(plugins.PreFilter.Disabled) > 0 {
		return fmt.Errorf("turns preFilter of %s off, which leaves its filter without the state it reads", plugins.PreFilter.Disabled[0].Name)
	}
	for _, set := range []configv1.PluginSet{plugins.PreEnqueue, plugins.PreFilter, plugins.Filter} {
		disable(nil, filters, set.Disabled)
		if err := enableFilters(set.Enabled); err != nil {
			return err
		}
	}
	if len(plugins.PreScore.Disabled) > 0 {
		return fmt.Errorf("turns preScore of %s off, which leaves its score without the state it reads", plugins.PreScore.Disabled[0].Name)
	}
	disable(weights, nil, plugins.Score.Disabled)
	if err := enableScore(plugins.Score.Enabled); err != nil {
		return err
	}
	for _, f := range defaultFilters {
		if !filters[f] {
			if p.DisabledFilters == nil {
				p.DisabledFilters = map[string]bool{}
			}
			p.DisabledFilters[f] = true
		}
	}
	return nil
}

// applyArgs takes a plugin's arguments in.
func applyArgs(p *placement.Profile, pc configv1.PluginConfig) error {
	raw := pc.Args.Raw
	if len(raw) == 0 {
		return nil
	}
	decode := func(into any) error {
		if err := yaml.UnmarshalStrict(raw, into); err != nil {
			return fmt.Errorf("args of %s: %w", pc.Name, err)
		}
		return nil
	}
	switch pc.Name {
	case placement.PluginNodeResourcesFit:
		var a configv1.NodeResourcesFitArgs
		if err := decode(&a); err != nil {
			return err
		}
		return fitArgs(p, &a)
	case placement.PluginBalancedAllocation:
		var a configv1.NodeResourcesBalancedAllocationArgs
		if err := decode(&a); err != nil {
			return err
		}
		if len(a.Resources) > 0 {
			r, err := resourceWeights(pc.Name, a.Resources)
			if err != nil {
				return err
			}
			p.Balanced = r
		}
	case placement.PluginInterPodAffinity:
		var a configv1.InterPodAffinityArgs
		if err := decode(&a); err != nil {
			return err
		}
		if a.HardPodAffinityWeight != nil {
			if w := *a.HardPodAffinityWeight; w < 0 || w > 100 {
				return fmt.Errorf("args of %s: hardPodAffinityWeight %d is outside 0 to 100", pc.Name, w)
			}
			p.HardPodAffinityWeight = int64(*a.HardPodAffinityWeight)
		}
		p.IgnorePreferredTermsOfExistingPods = a.IgnorePreferredTermsOfExistingPods
	case placement.PluginNodeAffinity:
		var a configv1.NodeAffinityArgs
		if err := decode(&a); err != nil {
			return err
		}
		if a.AddedAffinity != nil && a.AddedAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			return fmt.Errorf("args of %s: addedAffinity's required terms filter every pod, which the engine does not model", pc.Name)
		}
		p.AddedAffinity = a.AddedAffinity
	case placement.PluginPodTopologySpread:
		var a configv1.PodTopologySpreadArgs
		if err := decode(&a); err != nil {
			return err
		}
		return spreadArgs(p, &a)
	case placement.PluginVolumeBinding:
		var a configv1.VolumeBindingArgs
		if err := decode(&a); err != nil {
			return err
		}
		if len(a.Shape) > 0 {
			shape, err := shapeOf(pc.Name, a.Shape)
			if err != nil {
				return err
			}
			p.VolumeShape = shape
		}
	case "DefaultPreemption", "DynamicResources", "NodeVolumeLimits":
		// Preemption and devices: nothing that moves a pod among the
		// nodes the engine predicts for.
		return nil
	default:
		return fmt.Errorf("args of %s: not a plugin the engine models", pc.Name)
	}
	return nil
}

func fitArgs(p *placement.Profile, a *configv1.NodeResourcesFitArgs) error {
	if len(a.IgnoredResources) > 0 || len(a.IgnoredResourceGroups) > 0 {
		return fmt.Errorf("args of %s: ignoredResources and ignoredResourceGroups change the fit filter, which the engine does not model", placement.PluginNodeResourcesFit)
	}
	s := a.ScoringStrategy
	if s == nil {
		return nil
	}
	fit := placement.FitScoring{Type: string(s.Type), Resources: p.Fit.Resources}
	if fit.Type == "" {
		fit.Type = placement.LeastAllocated
	}
	if len(s.Resources) > 0 {
		r, err := resourceWeights(placement.PluginNodeResourcesFit, s.Resources)
		if err != nil {
			return err
		}
		fit.Resources = r
	}
	if fit.Type == placement.RequestedToCapacityRatio {
		if s.RequestedToCapacityRatio == nil || len(s.RequestedToCapacityRatio.Shape) == 0 {
			return fmt.Errorf("args of %s: RequestedToCapacityRatio needs a shape", placement.PluginNodeResourcesFit)
		}
		shape, err := shapeOf(placement.PluginNodeResourcesFit, s.RequestedToCapacityRatio.Shape)
		if err != nil {
			return err
		}
		fit.Shape = shape
	}
	p.Fit = fit
	return nil
}

// shapeOf is a utilization shape, its utilizations rising within 0 to
// 100 and its scores within 0 to 10.
func shapeOf(plugin string, points []configv1.UtilizationShapePoint) ([]placement.ShapePoint, error) {
	var out []placement.ShapePoint
	last := int32(-1)
	for _, pt := range points {
		if pt.Utilization < 0 || pt.Utilization > 100 || pt.Score < 0 || pt.Score > 10 || pt.Utilization <= last {
			return nil, fmt.Errorf("args of %s: shape point (%d, %d): utilization must rise within 0 to 100, score be 0 to 10", plugin, pt.Utilization, pt.Score)
		}
		last = pt.Utilization
		out = append(out, placement.ShapePoint{Utilization: int64(pt.Utilization), Score: int64(pt.Score)})
	}
	return out, nil
}

func resourceWeights(plugin string, specs []configv1.ResourceSpec) ([]placement.ResourceWeight, error) {
	out := make([]placement.ResourceWeight, 0, len(specs))
	for _, r := range specs {
		w := r.Weight
		if w == 0 {
			w = 1
		}
		if w < 1 || w > 100 {
			return nil, fmt.Errorf("args of %s: resource %s: weight %d is outside 1 to 100", plugin, r.Name, r.Weight)
		}
		out = append(out, placement.ResourceWeight{Name: corev1.ResourceName(r.Name), Weight: w})
	}
	return out, nil
}

func spreadArgs(p *placement.Profile, a *configv1.PodTopologySpreadArgs) error {
	switch a.DefaultingType {
	case "", configv1.SystemDefaulting:
		if len(a.DefaultConstraints) > 0 {
			return fmt.Errorf("args of %s: defaultConstraints need defaultingType List", placement.PluginPodTopologySpread)
		}
		p.DefaultSpread, p.SystemDefaulted = placement.SystemDefaultSpread(), true
	case configv1.ListDefaulting:
		for _, c := range a.DefaultConstraints {
			if c.WhenUnsatisfiable == corev1.DoNotSchedule {
				return fmt.Errorf("args of %s: the default constraint on %s is DoNotSchedule, a filter on every pod without constraints, which the engine does not model", placement.PluginPodTopologySpread, c.TopologyKey)
			}
			if c.LabelSelector != nil {
				return fmt.Errorf("args of %s: a default constraint may not have a labelSelector", placement.PluginPodTopologySpread)
			}
		}
		p.DefaultSpread, p.SystemDefaulted = a.DefaultConstraints, false
	default:
		return fmt.Errorf("args of %s: unknown defaultingType %q", placement.PluginPodTopologySpread, a.DefaultingType)
	}
	return nil
}
