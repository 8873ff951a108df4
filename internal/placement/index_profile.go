package placement

// SetProfile makes p the profile the engine predicts for; p is validated.
func (s *Snapshot) SetProfile(p *Profile) error {
	if err := p.Validate(); err != nil {
		return err
	}
	s.profile = p
	return nil
}

// Profile is the profile the engine predicts for.
func (s *Snapshot) Profile() *Profile { return s.profile }
