// Package brief keeps what the project tells people short: a list cut to
// its first few items with a count of the rest, a message cut to a size on
// a rune boundary. Conditions, events, hazards and plan entries all say
// things this way, so each knows it once.
package brief

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// FirstFew joins the first n items with sep and counts the rest.
func FirstFew(items []string, n int, sep string) string {
	if len(items) <= n {
		return strings.Join(items, sep)
	}
	return strings.Join(items[:n], sep) + fmt.Sprintf(" and %d more", len(items)-n)
}

// Truncate keeps a message within n bytes, on a rune boundary.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
