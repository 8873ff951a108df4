package plugin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// Scheme knows the kinds the plugin reads: Kubernetes' own and
// PlacementMigration.
var Scheme = newScheme()

func newScheme() *apiruntime.Scheme {
	s := apiruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := pgv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

var decoder = serializer.NewCodecFactory(Scheme).UniversalDeserializer()

// Document is one object read from a manifest, with where it was written.
type Document struct {
	File string
	// Line is the first line of the object's YAML document (1-based).
	Line   int
	Object apiruntime.Object
	// raw is the document's text, kept for a single object so that
	// findings can point at the line of a field.
	raw []byte
}

// LineOf is the line of the first occurrence of key (as "key:") in the
// document, or the document's first line.
func (d Document) LineOf(key string) int {
	for i, line := range bytes.Split(d.raw, []byte("\n")) {
		trimmed := bytes.TrimLeft(line, " \t-")
		if bytes.HasPrefix(trimmed, []byte(key+":")) {
			return d.Line + i
		}
	}
	return d.Line
}

// rawDocument is one YAML or JSON document before decoding.
type rawDocument struct {
	file string
	line int
	data []byte
}

// ReadManifests reads every object of a stream of YAML documents (or of
// one JSON document), expanding Lists such as `kubectl get -o yaml`
// writes. Kinds the plugin does not know are skipped: a rendered chart
// holds many.
func ReadManifests(name string, r io.Reader) ([]Document, error) {
	raws, err := splitDocuments(name, r)
	if err != nil {
		return nil, err
	}
	return decodeAll(raws)
}

// ReadDir reads every .yaml, .yml and .json file under dir.
func ReadDir(dir string) ([]Document, error) {
	raws, err := readDirDocuments(dir)
	if err != nil {
		return nil, err
	}
	return decodeAll(raws)
}

// readDirDocuments splits every .yaml, .yml and .json file under dir into
// its documents, in the files' name order.
func readDirDocuments(dir string) ([]rawDocument, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yaml", ".yml", ".json":
			if !d.IsDir() {
				files = append(files, path)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read snapshot directory: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("snapshot directory %s holds no .yaml, .yml or .json file", dir)
	}
	sort.Strings(files)
	var raws []rawDocument
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		raws = append(raws, split(f, data)...)
	}
	return raws, nil
}

// splitDocuments cuts a stream at its "---" lines, remembering where each
// document starts. The documents share the stream's buffer.
func splitDocuments(name string, r io.Reader) ([]rawDocument, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return split(name, data), nil
}

// split cuts data at its "---" lines.
func split(name string, data []byte) []rawDocument {
	var out []rawDocument
	docStart, startLine := -1, 1
	flush := func(end int) {
		if docStart >= 0 && len(bytes.TrimSpace(data[docStart:end])) > 0 {
			out = append(out, rawDocument{file: name, line: startLine, data: data[docStart:end]})
		}
		docStart = -1
	}
	for pos, line := 0, 1; pos < len(data); line++ {
		end := len(data)
		if nl := bytes.IndexByte(data[pos:], '\n'); nl >= 0 {
			end = pos + nl
		}
		text := data[pos:end]
		switch {
		case bytes.Equal(bytes.TrimRight(text, " \t\r"), []byte("---")) || bytes.HasPrefix(text, []byte("--- ")):
			flush(pos)
		case docStart < 0 && len(bytes.TrimSpace(text)) == 0:
		case docStart < 0:
			docStart, startLine = pos, line
		}
		pos = end + 1
	}
	flush(len(data))
	return out
}

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
