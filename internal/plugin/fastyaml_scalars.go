package plugin

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// quoted reads a whole '...' or "..." scalar without escapes.
func quoted(v []byte) (string, bool) {
	if len(v) < 2 || v[len(v)-1] != v[0] {
		return "", false
	}
	inner := v[1 : len(v)-1]
	if v[0] == '"' {
		if bytes.ContainsAny(inner, "\"\\") {
			return "", false
		}
		return string(inner), true
	}
	// Inside single quotes a quote is written twice; a lone one ends the
	// scalar early, which is not a simple document.
	out := make([]byte, 0, len(inner))
	for i := 0; i < len(inner); i++ {
		if inner[i] == '\'' {
			if i+1 >= len(inner) || inner[i+1] != '\'' {
				return "", false
			}
			i++
		}
		out = append(out, inner[i])
	}
	return string(out), true
}

// plainString reports whether a plain scalar is certainly a string to
// YAML 1.1: not a word it reads as a boolean or null, not starting with
// an indicator, no comment.
func plainString(s []byte) bool {
	if len(s) == 0 || isNumberStart(s[0]) {
		return false
	}
	switch s[0] {
	case '&', '*', '!', '|', '>', '%', '@', '`', '{', '[', ']', '}', '#', ',', '?', ':', '"', '\'', '-', '=', '<':
		return false
	}
	switch string(s) {
	case "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF",
		"true", "True", "TRUE", "false", "False", "FALSE", "null", "Null", "NULL", "~":
		return false
	}
	return s[len(s)-1] != ':' && !bytes.Contains(s, []byte(": ")) && !bytes.Contains(s, []byte(" #")) && bytes.IndexByte(s, '\t') < 0
}

// digitString reports whether a plain scalar that starts with a digit is
// still certainly a string: it holds a character that no YAML 1.1 number,
// timestamp or sexagesimal holds, as quantities (50m, 64Mi), durations and
// CIDRs do.
func digitString(s []byte) bool {
	if s[0] < '0' || s[0] > '9' || s[len(s)-1] == ':' || bytes.Contains(s, []byte(": ")) || bytes.Contains(s, []byte(" #")) {
		return false
	}
	return bytes.IndexFunc(s, func(r rune) bool {
		return !strings.ContainsRune("0123456789+-._:eExXoObBtTzZ ", r)
	}) >= 0
}

func isNumberStart(b byte) bool { return b >= '0' && b <= '9' || b == '+' || b == '.' }

// jsonNumber accepts the integers and decimals that YAML and JSON read
// alike: no sign, no leading zero, no exponent, no .5 or 5.
func jsonNumber(s []byte) bool {
	if s[0] == '0' && len(s) > 1 && s[1] != '.' {
		return false
	}
	dot := false
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] >= '0' && s[i] <= '9':
		case s[i] == '.' && !dot && i > 0 && i < len(s)-1:
			dot = true
		default:
			return false
		}
	}
	if !dot {
		_, err := strconv.ParseInt(string(s), 10, 64)
		return err == nil
	}
	return true
}

func appendJSONString(out []byte, s []byte) []byte {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < 0x20 || b == '"' || b == '\\' || b >= 0x7f {
			data, _ := json.Marshal(string(s))
			return append(out, data...)
		}
	}
	out = append(out, '"')
	out = append(out, s...)
	return append(out, '"')
}
