package plugin

import (
	"bufio"
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
	"sync"

	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
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
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		docs, err := splitDocuments(f, fh)
		fh.Close()
		if err != nil {
			return nil, err
		}
		raws = append(raws, docs...)
	}
	return decodeAll(raws)
}

// splitDocuments cuts a stream at its "---" lines, remembering where each
// document starts.
func splitDocuments(name string, r io.Reader) ([]rawDocument, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 64*1024*1024)
	var out []rawDocument
	var cur bytes.Buffer
	start, line := 1, 0
	flush := func() {
		if len(bytes.TrimSpace(cur.Bytes())) > 0 {
			out = append(out, rawDocument{file: name, line: start, data: bytes.Clone(cur.Bytes())})
		}
		cur.Reset()
	}
	for sc.Scan() {
		line++
		text := sc.Bytes()
		if bytes.Equal(bytes.TrimRight(text, " \t\r"), []byte("---")) || bytes.HasPrefix(text, []byte("--- ")) {
			flush()
			start = line + 1
			continue
		}
		if cur.Len() == 0 && len(bytes.TrimSpace(text)) == 0 {
			start = line + 1
			continue
		}
		cur.Write(text)
		cur.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	flush()
	return out, nil
}

// decodeAll decodes the documents on every core: reading a snapshot of a
// large cluster is mostly decoding YAML.
func decodeAll(raws []rawDocument) ([]Document, error) {
	results := make([][]Document, len(raws))
	errs := make([]error, len(raws))
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(1, runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for i := range next {
				results[i], errs[i] = decodeDocument(raws[i])
			}
		})
	}
	for i := range raws {
		next <- i
	}
	close(next)
	wg.Wait()
	var out []Document
	for i := range raws {
		if errs[i] != nil {
			return nil, errs[i]
		}
		out = append(out, results[i]...)
	}
	return out, nil
}

// typeMeta is what tells a document's kind, and a List's items.
type typeMeta struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []json.RawMessage `json:"items"`
}

func decodeDocument(raw rawDocument) ([]Document, error) {
	data, err := yaml.YAMLToJSON(raw.data)
	if err != nil {
		return nil, fmt.Errorf("%s:%d: %w", raw.file, raw.line, err)
	}
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		return nil, nil
	}
	var tm typeMeta
	if err := json.Unmarshal(data, &tm); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", raw.file, raw.line, err)
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
	d, err := decodeObject(raw.file, raw.line, data)
	if err != nil || d == nil {
		return nil, err
	}
	d.raw = raw.data
	return []Document{*d}, nil
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
