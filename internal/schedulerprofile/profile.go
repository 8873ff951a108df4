package schedulerprofile

import (
	"errors"
	"fmt"
	"os"
	"slices"

	corev1 "k8s.io/api/core/v1"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"

	"github.com/placement-guard/placement-guard/internal/placement"
)

// The configuration's group, version and kind.
const (
	apiVersion = "kubescheduler.config.k8s.io/v1"
	kind       = "KubeSchedulerConfiguration"
)

// Load reads the KubeSchedulerConfiguration in file whole: every profile
// it describes, each pod to be predicted with the one its schedulerName
// names, and fallback ("" for default-scheduler) for a pod that names
// none.
func Load(file, fallback string) (*placement.Profiles, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	ps, err := Parse(raw, fallback)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return ps, nil
}

// Parse is Load of the file's content. The configuration is refused when
// nothing it schedules can be predicted (an extender), or when the
// fallback profile cannot be; another profile the engine cannot predict
// as the scheduler would is kept as unpredictable, with why, so that
// the pods naming it are said to be unpredicted rather than refused at
// start.
func Parse(raw []byte, fallback string) (*placement.Profiles, error) {
	if fallback == "" {
		fallback = corev1.DefaultSchedulerName
	}
	var cfg configv1.KubeSchedulerConfiguration
	if err := yaml.UnmarshalStrict(raw, &cfg); err != nil {
		return nil, fmt.Errorf("does not parse as a %s: %w", kind, err)
	}
	if cfg.APIVersion != apiVersion || cfg.Kind != kind {
		return nil, fmt.Errorf("is apiVersion %q, kind %q: want %s, %s", cfg.APIVersion, cfg.Kind, apiVersion, kind)
	}
	if len(cfg.Extenders) > 0 {
		return nil, fmt.Errorf("names %d extender(s) (%s first): an extender's filtering and scoring cannot be predicted", len(cfg.Extenders), cfg.Extenders[0].URLPrefix)
	}
	if err := checkPercentage(cfg.PercentageOfNodesToScore); err != nil {
		return nil, err
	}
	all, err := namedProfiles(cfg.Profiles)
	if err != nil {
		return nil, err
	}
	var profiles []*placement.Profile
	unpredictable := map[string]error{}
	for _, n := range all {
		p, err := profileOf(n.profile, n.name, cfg.PercentageOfNodesToScore)
		if err != nil {
			unpredictable[n.name] = err
			continue
		}
		profiles = append(profiles, p)
	}
	if !slices.ContainsFunc(all, func(n named) bool { return n.name == fallback }) {
		return nil, noProfile(fallback, all)
	}
	if err := unpredictable[fallback]; err != nil {
		return nil, err
	}
	ps, err := placement.NewProfiles(fallback, profiles...)
	if err != nil {
		return nil, err
	}
	for name, why := range unpredictable {
		ps.MarkUnpredictable(name, why.Error())
	}
	return ps, nil
}

// named is a profile of the configuration with its schedulerName.
type named struct {
	name    string
	profile configv1.KubeSchedulerProfile
}

// namedProfiles are the configuration's profiles by schedulerName: a lone
// profile without a name is default-scheduler's, and a configuration
// without profiles has only the default one.
func namedProfiles(profiles []configv1.KubeSchedulerProfile) ([]named, error) {
	if len(profiles) == 0 {
		return []named{{name: corev1.DefaultSchedulerName}}, nil
	}
	out := make([]named, 0, len(profiles))
	seen := map[string]bool{}
	for _, p := range profiles {
		name := corev1.DefaultSchedulerName
		if p.SchedulerName != nil {
			name = *p.SchedulerName
		} else if len(profiles) > 1 {
			return nil, errors.New("has several profiles, and one names no schedulerName")
		}
		if seen[name] {
			return nil, fmt.Errorf("has two profiles named %q", name)
		}
		seen[name] = true
		out = append(out, named{name: name, profile: p})
	}
	return out, nil
}

// noProfile says the configuration lacks the fallback profile.
func noProfile(fallback string, profiles []named) error {
	names := make([]string, len(profiles))
	for i, n := range profiles {
		names[i] = n.name
	}
	return fmt.Errorf("has no profile %q (it has %v): name the one for pods that name no scheduler with --scheduler-name", fallback, names)
}

// profileOf is the engine's Profile of one of the configuration's
// profiles; percentage is the configuration's percentageOfNodesToScore,
// which a profile's own overrides.
func profileOf(prof configv1.KubeSchedulerProfile, name string, percentage *int32) (*placement.Profile, error) {
	p, err := fromProfile(prof)
	if err != nil {
		return nil, fmt.Errorf("profile %q: %w", name, err)
	}
	p.Name = name
	if p.PercentageOfNodesToScore == nil && percentage != nil && *percentage != 0 {
		p.PercentageOfNodesToScore = percentage
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

func checkPercentage(p *int32) error {
	if p != nil && (*p < 0 || *p > 100) {
		return fmt.Errorf("percentageOfNodesToScore %d is outside 0 to 100", *p)
	}
	return nil
}
