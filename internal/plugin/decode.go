package plugin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"

	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// decodeAll decodes the documents on every core: reading a snapshot of a
// large cluster is mostly decoding YAML.
func decodeAll(raws []rawDocument) ([]Document, error) {
	var out []Document
	err := decodeStream(raws, func(d Document) error {
		out = append(out, d)
		return nil
	})
	return out, err
}

// chunkSize is how many documents a decoding worker takes at a time.
const chunkSize = 512

type decodedChunk struct {
	docs []Document
	err  error
}

// decodeStream decodes the documents on every core and hands them to
// consume in their order, as soon as each chunk is decoded: what consume
// does (indexing a snapshot) runs while the rest is still being decoded.
func decodeStream(raws []rawDocument, consume func(Document) error) error {
	n := (len(raws) + chunkSize - 1) / chunkSize
	results := make([]chan decodedChunk, n)
	for k := range results {
		results[k] = make(chan decodedChunk, 1)
	}
	next := make(chan int)
	done := make(chan struct{})
	defer close(done)
	go func() {
		defer close(next)
		for k := range n {
			select {
			case next <- k:
			case <-done:
				return
			}
		}
	}()
	for range max(1, runtime.GOMAXPROCS(0)) {
		go func() {
			var c converter
			for k := range next {
				var chunk decodedChunk
				for _, raw := range raws[k*chunkSize : min((k+1)*chunkSize, len(raws))] {
					docs, err := decodeDocument(&c, raw)
					if err != nil {
						chunk.err = err
						break
					}
					chunk.docs = append(chunk.docs, docs...)
				}
				results[k] <- chunk
			}
		}()
	}
	for k := range n {
		chunk := <-results[k]
		if chunk.err != nil {
			return chunk.err
		}
		for _, d := range chunk.docs {
			if err := consume(d); err != nil {
				return err
			}
		}
	}
	return nil
}

// toJSON converts a document to JSON: JSON as it is, kubectl's YAML on the
// fast path, anything else with the full YAML parser.
func toJSON(c *converter, doc []byte) ([]byte, error) {
	c.apiVersion, c.kind = "", ""
	if trimmed := bytes.TrimSpace(doc); len(trimmed) > 0 && trimmed[0] == '{' {
		return trimmed, nil
	}
	if data, ok := c.convert(doc); ok {
		return data, nil
	}
	return yaml.YAMLToJSON(doc)
}

// typeMeta is what tells a document's kind, and a List's items.
type typeMeta struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []json.RawMessage `json:"items"`
}

func decodeDocument(c *converter, raw rawDocument) ([]Document, error) {
	data, err := toJSON(c, raw.data)
	if err != nil {
		return nil, fmt.Errorf("%s:%d: %w", raw.file, raw.line, err)
	}
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		return nil, nil
	}
	// Only a document with items can be a List; reading the kind of every
	// other one first would parse it twice.
	var tm typeMeta
	if bytes.Contains(data, []byte(`"items"`)) {
		if err := json.Unmarshal(data, &tm); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", raw.file, raw.line, err)
		}
	}
	if strings.HasSuffix(tm.Kind, "List") && tm.Items != nil {
		var out []Document
		for _, item := range tm.Items {
			d, err := decodeObject(raw.file, raw.line, item)
			if err != nil {
				return nil, err
			}
			if d != nil {
				out = append(out, *d)
			}
		}
		return out, nil
	}
	d, err := decodeKnown(c, raw, data)
	if err != nil || d == nil {
		return nil, err
	}
	d.raw = raw.data
	return []Document{*d}, nil
}

// decodeKnown decodes a document whose kind the fast path read, straight
// into its type, as the universal deserializer would; others go through it.
func decodeKnown(c *converter, raw rawDocument, data []byte) (*Document, error) {
	gv, err := schema.ParseGroupVersion(c.apiVersion)
	if c.kind == "" || c.apiVersion == "" || err != nil {
		return decodeObject(raw.file, raw.line, data)
	}
	gvk := gv.WithKind(c.kind)
	obj, err := Scheme.New(gvk)
	if err != nil {
		if apiruntime.IsNotRegisteredError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("%s:%d: %w", raw.file, raw.line, err)
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, obj); err != nil {
		return nil, fmt.Errorf("%s:%d: decode %s: %w", raw.file, raw.line, gvk.Kind, err)
	}
	return &Document{File: raw.file, Line: raw.line, Object: obj}, nil
}

func decodeObject(file string, line int, data []byte) (*Document, error) {
	obj, _, err := decoder.Decode(data, nil, nil)
	if err != nil {
		if apiruntime.IsNotRegisteredError(err) || apiruntime.IsMissingKind(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("%s:%d: %w", file, line, err)
	}
	return &Document{File: file, Line: line, Object: obj}, nil
}
