package admission

import "fmt"

// Mode is what the check does with a finding.
type Mode string

const (
	// ModeWarn admits the change with warnings (the default).
	ModeWarn Mode = "Warn"
	// ModeDeny refuses a change with a blocking finding, in the same words.
	ModeDeny Mode = "Deny"
	// ModeAdopt admits the hard constraints a change adds in their soft
	// form, for a PlacementMigration to harden (the webhook's Adopter); what
	// it cannot adopt is judged as in Warn mode.
	ModeAdopt Mode = "Adopt"
	// ModeOff judges nothing.
	ModeOff Mode = "Off"
)

// ParseMode reads a mode as the flag and the label write it.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeWarn, ModeDeny, ModeAdopt, ModeOff:
		return m, nil
	}
	return "", fmt.Errorf("admission mode %q: want Warn, Deny, Adopt or Off", s)
}
