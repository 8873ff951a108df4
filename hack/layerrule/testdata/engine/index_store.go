package engine

// store uses the layer below it, which is allowed, and a field of a type
// declared above it, which is not.
type store struct{ terms []Term }

func (s store) first(a answer) string { return s.terms[0].Upper() + a.text }
