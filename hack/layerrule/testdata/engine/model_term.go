package engine

import "strings"

// Term reaches up to a question: the rule must refuse it.
type Term struct{ Key string }

func (t Term) Upper() string { return strings.ToUpper(t.Key) + asked }
