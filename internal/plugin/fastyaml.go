package plugin

import (
	"bytes"
)

// fastYAMLToJSON converts the block-style YAML that kubectl and helm write
// (mappings, "- " sequences, plain and quoted scalars, {} and []) straight
// to JSON, without building a tree: reading a snapshot of a large cluster
// is mostly this conversion. Anything outside that subset (anchors, tags,
// block and multi-line scalars, flow collections with content, escapes,
// scalars whose type YAML 1.1 resolves in surprising ways, anything not
// ASCII) returns false,
// and the caller converts the document with the full YAML parser instead.
// A differential test holds the two to the same output.
func fastYAMLToJSON(doc []byte) ([]byte, bool) {
	var c converter
	return c.convert(doc)
}

// convert is fastYAMLToJSON reusing the converter's buffers: the JSON it
// returns is valid until the next call.
func (c *converter) convert(doc []byte) ([]byte, bool) {
	// Control characters and non-ASCII text (byte order marks, line
	// separators, characters YAML forbids) are left to the parser.
	for _, b := range doc {
		if b >= 0x7f || b < 0x20 && b != '\n' {
			return nil, false
		}
	}
	c.lines, c.out, c.i, c.apiVersion, c.kind = c.lines[:0], c.out[:0], 0, "", ""
	for len(doc) > 0 {
		raw := doc
		if nl := bytes.IndexByte(doc, '\n'); nl >= 0 {
			raw, doc = doc[:nl], doc[nl+1:]
		} else {
			doc = nil
		}
		raw = bytes.TrimRight(raw, " \r")
		text := bytes.TrimLeft(raw, " ")
		if len(text) == 0 || text[0] == '#' {
			continue
		}
		if text[0] == '\t' || bytes.HasPrefix(text, []byte("...")) || bytes.HasPrefix(text, []byte("---")) || bytes.HasPrefix(text, []byte("%")) {
			return nil, false
		}
		c.lines = append(c.lines, yamlLine{indent: len(raw) - len(text), text: text})
	}
	if len(c.lines) == 0 || c.lines[0].indent != 0 {
		return nil, false
	}
	if !c.node(0) || c.i != len(c.lines) {
		return nil, false
	}
	return c.out, true
}

type yamlLine struct {
	indent int
	text   []byte
}

type converter struct {
	lines []yamlLine
	i     int
	out   []byte
	// apiVersion and kind are the document's own, when written plainly at
	// the top: they spare the decoder a pass to find them.
	apiVersion, kind string
}

func isItem(text []byte) bool {
	return len(text) > 0 && text[0] == '-' && (len(text) == 1 || text[1] == ' ')
}

// node converts the mapping or sequence whose first line is the current one.
func (c *converter) node(indent int) bool {
	if isItem(c.lines[c.i].text) {
		return c.sequence(indent)
	}
	return c.mapping(indent)
}

// nested converts what follows a "key:" or a "-" with nothing after it:
// a block more indented, a sequence at the key's own indent, or null.
func (c *converter) nested(indent int, seqAtSameIndent bool) bool {
	if c.i < len(c.lines) {
		next := c.lines[c.i]
		if next.indent > indent || (seqAtSameIndent && next.indent == indent && isItem(next.text)) {
			return c.node(next.indent)
		}
	}
	c.out = append(c.out, "null"...)
	return true
}

func (c *converter) mapping(indent int) bool {
	c.out = append(c.out, '{')
	first := true
	for c.i < len(c.lines) && c.lines[c.i].indent == indent && !isItem(c.lines[c.i].text) {
		key, rest, ok := splitKey(c.lines[c.i].text)
		if !ok {
			return false
		}
		if !first {
			c.out = append(c.out, ',')
		}
		first = false
		c.out = appendJSONString(c.out, key)
		c.out = append(c.out, ':')
		c.i++
		if indent == 0 && (string(key) == "apiVersion" || string(key) == "kind") && len(rest) > 0 && plainString(rest) {
			if string(key) == "kind" {
				c.kind = string(rest)
			} else {
				c.apiVersion = string(rest)
			}
		}
		if len(rest) == 0 {
			if !c.nested(indent, true) {
				return false
			}
		} else if !c.scalar(rest) {
			return false
		}
	}
	if c.i < len(c.lines) && c.lines[c.i].indent > indent {
		return false
	}
	c.out = append(c.out, '}')
	return true
}

func (c *converter) sequence(indent int) bool {
	c.out = append(c.out, '[')
	first := true
	for c.i < len(c.lines) && c.lines[c.i].indent == indent && isItem(c.lines[c.i].text) {
		if !first {
			c.out = append(c.out, ',')
		}
		first = false
		text := c.lines[c.i].text
		rest := bytes.TrimLeft(text[1:], " ")
		switch {
		case len(rest) == 0:
			c.i++
			if !c.nested(indent, false) {
				return false
			}
		case isItem(rest):
			return false
		default:
			if _, _, isKey := splitKey(rest); isKey {
				// "- key: value" opens a mapping indented to its key.
				c.lines[c.i] = yamlLine{indent: indent + len(text) - len(rest), text: rest}
				if !c.mapping(c.lines[c.i].indent) {
					return false
				}
				continue
			}
			if !c.scalar(rest) {
				return false
			}
			c.i++
		}
	}
	if c.i < len(c.lines) && c.lines[c.i].indent > indent {
		return false
	}
	c.out = append(c.out, ']')
	return true
}

// splitKey splits "key: value" or "key:"; ok is false for a line that is
// not a simple mapping entry.
func splitKey(text []byte) (key []byte, rest []byte, ok bool) {
	if len(text) > 0 && (text[0] == '"' || text[0] == '\'') {
		end := bytes.IndexByte(text[1:], text[0])
		if end < 0 {
			return nil, nil, false
		}
		after := text[end+2:]
		if len(after) == 0 || after[0] != ':' || (len(after) > 1 && after[1] != ' ') {
			return nil, nil, false
		}
		s, ok := quoted(text[:end+2])
		return []byte(s), bytes.TrimLeft(after[1:], " "), ok
	}
	i := bytes.Index(text, []byte(": "))
	switch {
	case i > 0:
	case text[len(text)-1] == ':':
		i = len(text) - 1
	default:
		return nil, nil, false
	}
	key = bytes.TrimRight(text[:i], " ")
	if !plainString(key) {
		return nil, nil, false
	}
	rest = bytes.TrimLeft(text[i+1:], " ")
	if bytes.Contains(rest, []byte(": ")) && rest[0] != '"' && rest[0] != '\'' {
		return nil, nil, false
	}
	return key, rest, true
}

// scalar converts a value written on the key's line.
func (c *converter) scalar(v []byte) bool {
	switch {
	case v[0] == '"' || v[0] == '\'':
		s, ok := quoted(v)
		if !ok {
			return false
		}
		c.out = appendJSONString(c.out, []byte(s))
		return true
	case string(v) == "{}" || string(v) == "[]":
		c.out = append(c.out, v...)
		return true
	}
	switch string(v) {
	case "~", "null", "Null", "NULL":
		c.out = append(c.out, "null"...)
		return true
	case "true", "True", "TRUE":
		c.out = append(c.out, "true"...)
		return true
	case "false", "False", "FALSE":
		c.out = append(c.out, "false"...)
		return true
	}
	if isNumberStart(v[0]) {
		switch {
		case jsonNumber(v):
			c.out = append(c.out, v...)
		case digitString(v):
			c.out = appendJSONString(c.out, v)
		default:
			return false
		}
		return true
	}
	if !plainString(v) {
		return false
	}
	c.out = appendJSONString(c.out, v)
	return true
}
