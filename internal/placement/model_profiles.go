package placement

import (
	"fmt"
	"maps"
	"slices"
)

// Profiles are the profiles one KubeSchedulerConfiguration describes, by
// schedulerName: a pod is predicted with the profile its own
// spec.schedulerName names, as kube-scheduler hands it to that profile's
// framework. Fallback is the profile of a pod that names none (a manifest
// the API server has not defaulted yet). A pod naming a profile the
// configuration does not describe is scheduled by something the engine
// does not know: it is evaluated with the fallback's filters, and every
// answer about it says so (HazardUnknownScheduler).
type Profiles struct {
	byName   map[string]*Profile
	fallback *Profile
	// unpredictable are the configuration's profiles the engine cannot
	// predict as the scheduler would, and why.
	unpredictable map[string]string
}

// NewProfiles holds profiles, the one named fallback predicting pods that
// name no scheduler; each profile is validated.
func NewProfiles(fallback string, profiles ...*Profile) (*Profiles, error) {
	ps := &Profiles{byName: make(map[string]*Profile, len(profiles))}
	for _, p := range profiles {
		if err := p.Validate(); err != nil {
			return nil, err
		}
		if _, dup := ps.byName[p.Name]; dup {
			return nil, fmt.Errorf("profile %q is described twice", p.Name)
		}
		ps.byName[p.Name] = p
	}
	if ps.fallback = ps.byName[fallback]; ps.fallback == nil {
		return nil, fmt.Errorf("has no profile %q (it has %v)", fallback, ps.Names())
	}
	return ps, nil
}

// OneProfile holds p alone, the profile of every pod naming it or none.
func OneProfile(p *Profile) (*Profiles, error) { return NewProfiles(p.Name, p) }

// DefaultProfiles hold kube-scheduler's default profile alone.
func DefaultProfiles() *Profiles {
	p := DefaultProfile()
	return &Profiles{byName: map[string]*Profile{p.Name: p}, fallback: p}
}

// MarkUnpredictable records that the configuration describes profile
// name in a way the engine cannot predict, and why: its pods are said to
// be unpredicted with that reason.
func (ps *Profiles) MarkUnpredictable(name, why string) {
	if ps.unpredictable == nil {
		ps.unpredictable = map[string]string{}
	}
	ps.unpredictable[name] = why
}

// Unpredictable is why the engine cannot predict profile name, "" when
// it can or the configuration does not describe it.
func (ps *Profiles) Unpredictable(name string) string { return ps.unpredictable[name] }

// UnpredictableNames are the profiles the engine cannot predict, sorted.
func (ps *Profiles) UnpredictableNames() []string { return slices.Sorted(maps.Keys(ps.unpredictable)) }

// Names are the described schedulerNames, sorted.
func (ps *Profiles) Names() []string { return slices.Sorted(maps.Keys(ps.byName)) }

// Fallback is the profile of a pod that names no scheduler.
func (ps *Profiles) Fallback() *Profile { return ps.fallback }

// Of is the profile of a pod naming schedulerName, and whether the
// configuration describes it; the fallback when it does not.
func (ps *Profiles) Of(schedulerName string) (*Profile, bool) {
	if schedulerName == "" {
		return ps.fallback, true
	}
	if p, ok := ps.byName[schedulerName]; ok {
		return p, true
	}
	return ps.fallback, false
}
