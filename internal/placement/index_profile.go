package placement

import corev1 "k8s.io/api/core/v1"

// SetProfiles makes ps the profiles the engine predicts with.
func (s *Snapshot) SetProfiles(ps *Profiles) {
	s.profiles = ps
	// The node filters kept between questions are the old profiles'.
	s.filters, s.existingAnti = nil, nil
}

// SetProfile makes p, validated, the one profile the engine predicts with.
func (s *Snapshot) SetProfile(p *Profile) error {
	ps, err := OneProfile(p)
	if err != nil {
		return err
	}
	s.SetProfiles(ps)
	return nil
}

// Profiles are the profiles the engine predicts with.
func (s *Snapshot) Profiles() *Profiles { return s.profiles }

// profileOf is the profile pod is predicted with (see Profiles).
func (s *Snapshot) profileOf(pod *corev1.Pod) *Profile {
	p, _ := s.profiles.Of(pod.Spec.SchedulerName)
	return p
}

// SchedulerOf is the profile the pods of w are predicted with, and
// whether the configuration describes the scheduler they name.
func (s *Snapshot) SchedulerOf(w *Workload) (profile string, described bool) {
	p, ok := s.profiles.Of(w.Template.Spec.SchedulerName)
	if !ok {
		return w.Template.Spec.SchedulerName, false
	}
	return p.Name, true
}
