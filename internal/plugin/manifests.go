package plugin

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

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
	// A snapshot directory may be a link to one (a fleet's clusters sharing
	// a snapshot); the walk follows no link but this one.
	if resolved, err := filepath.EvalSymlinks(dir); err == nil {
		dir = resolved
	}
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
