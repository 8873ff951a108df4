package fleet

import (
	"fmt"
	"strings"
)

// Level ranks a member's verdict; the fleet's exit code is its worst.
type Level int

const (
	// OK: the change proceeds there.
	OK Level = iota
	// Warn: it waits (for capacity) or proceeds with a finding worth a look.
	Warn
	// Blocked: the change cannot complete there as it is.
	Blocked
	// Unknown: the member could not be asked; nothing is proven there.
	Unknown
)

var levelNames = [...]string{OK: "OK", Warn: "Warn", Blocked: "Blocked", Unknown: "Unknown"}

func (l Level) String() string {
	if l < OK || l > Unknown {
		return fmt.Sprintf("Level(%d)", int(l))
	}
	return levelNames[l]
}

// MarshalText writes the level by name in JSON and YAML.
func (l Level) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText reads a level by name, as MarshalText writes it.
func (l *Level) UnmarshalText(b []byte) error {
	for i, name := range levelNames {
		if string(b) == name {
			*l = Level(i)
			return nil
		}
	}
	return fmt.Errorf("unknown level %q", b)
}

// ParseThreshold reads --fail-on: the level from which the fleet fails,
// Blocked or Warn. Unknown always fails.
func ParseThreshold(s string) (Level, error) {
	for _, l := range []Level{Warn, Blocked} {
		if strings.EqualFold(s, l.String()) {
			return l, nil
		}
	}
	return 0, fmt.Errorf("--fail-on must be Blocked or Warn, not %q", s)
}

// Worst is the highest of levels, OK for none.
func Worst(levels ...Level) Level {
	w := OK
	for _, l := range levels {
		w = max(w, l)
	}
	return w
}

// Fails reports whether a fleet whose worst level is worst fails at
// threshold.
func Fails(worst, threshold Level) bool { return worst >= threshold || worst == Unknown }
