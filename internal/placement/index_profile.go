package placement

// SetProfile makes p the profile the engine predicts for; p is validated.
func (s *Snapshot) SetProfile(p *Profile) error {
	if err := p.Validate(); err != nil {
		return err
	}
	s.profile = p
	// The node filters kept between questions are the old profile's.
	s.filters, s.existingAnti = nil, nil
	return nil
}

// Profile is the profile the engine predicts for.
func (s *Snapshot) Profile() *Profile { return s.profile }
