package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// sameAsYAML checks that the fast conversion, when it takes a document,
// gives what the full YAML parser gives.
func sameAsYAML(t *testing.T, doc string) (fast bool) {
	t.Helper()
	got, ok := fastYAMLToJSON([]byte(doc))
	want, err := yaml.YAMLToJSON([]byte(doc))
	if !ok {
		return false
	}
	if err != nil {
		t.Errorf("the fast path took a document YAML refuses (%v):\n%s", err, doc)
		return true
	}
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Errorf("the fast path wrote invalid JSON %s: %v\n%s", got, err, doc)
		return true
	}
	if err := json.Unmarshal(want, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("the fast path differs:\n yaml: %s\n fast: %s\ndoc:\n%s", want, got, doc)
	}
	return true
}

// Every document of the test data, as kubectl and helm write them, is
// converted as the full parser converts it.
func TestFastYAMLMatchesTheParserOnTestData(t *testing.T) {
	taken, total := 0, 0
	err := filepath.WalkDir("testdata", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		docs, err := splitDocuments(path, f)
		if err != nil {
			return err
		}
		for _, d := range docs {
			total++
			if sameAsYAML(t, string(d.data)) {
				taken++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fast path took %d of %d hand-written documents (flow mappings go to the parser)", taken, total)
	// kubectl's own output is taken whole.
	dir := t.TempDir()
	writeLargeSnapshot(t, dir, 3, 2, 2)
	for _, name := range []string{"nodes.yaml", "workloads.yaml", "pods.yaml"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		docs, err := splitDocuments(name, f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			// A node's podCIDR starts with a digit, which the parser types.
			if !sameAsYAML(t, string(d.data)) && name != "nodes.yaml" {
				t.Errorf("the fast path refused kubectl-style YAML:\n%s", d.data)
			}
		}
	}
}

// Documents outside the subset go to the full parser; those inside it
// agree with it, including the scalars YAML 1.1 types in surprising ways.
func TestFastYAMLRefusesWhatItDoesNotKnow(t *testing.T) {
	cases := map[string]bool{ // document -> taken by the fast path
		"a: b\nc:\n  d: 1\n  e: [x]\n":                         false,
		"a: b\nc:\n- 1\n- two\n- {}\n":                         true,
		"a:\n  - name: x\n    value: 'it''s'\n  - name: why\n": true,
		"a:\n  - name: y\n":                                    false,
		"a: yes\n":                                             false,
		"a: on\n":                                              false,
		"a: 0755\n":                                            false,
		"a: 1e3\n":                                             false,
		"a: .5\n":                                              false,
		"a: -1\n":                                              false,
		"a: 12345678901234567890123\n":                         false,
		"a: 1.50\nb: 0\nc: 0.25\n":                             true,
		"a: true\nb: False\nc: ~\nd: null\n":                   true,
		"a: &x 1\nb: *x\n":                                     false,
		"a: |\n  multi\n  line\n":                              false,
		"a: >\n  folded\n":                                     false,
		"a: plain\n  continued\n":                              false,
		"a: \"esc\\n\"\n":                                      false,
		"a: \"2026-11-01T10:00:00Z\"\n":                        true,
		"a: 2026-11-01\n":                                      false,
		"a: x # comment\n":                                     false,
		"# lead\na: b # c\n":                                   false,
		"80: http\n":                                           false,
		"\"quoted key\": v\n'k': w\n":                          true,
		"'k''s': w\n":                                          false,
		"a: b: c\n":                                            false,
		"a: b:\n":                                              false,
		"a:\n- - nested\n":                                     false,
		"a: !!str 1\n":                                         false,
		"a: 'unterminated\n":                                   false,
		"a: {b: 1}\n":                                          false,
		"key: http://example.com/x?y=1\n":                      true,
		"a:\n    b: 1\n  c: 2\n":                               false,
		"a: b\n\tc: d\n":                                       false,
		"a: é ünïcode 😀\nb: \"quote\"\"\"\n":                   false,
		"a: é ünïcode 😀\n":                                     false,
		"list:\n-\n  x: 1\n- why\n-\n":                         true,
		"- a\n- b\n":                                           true,
		"apiVersion: v1\nkind: List\nitems: []\n":              true,
	}
	for doc, taken := range cases {
		if got := sameAsYAML(t, doc); got != taken {
			t.Errorf("fast path took=%v, want %v, for:\n%s", got, taken, doc)
		}
	}
}

// FuzzFastYAML holds the fast path to the full parser on any input.
func FuzzFastYAML(f *testing.F) {
	for _, seed := range []string{"a: b\n", "a:\n- b: 1\n  c: 'x'\n", "k: \"v\"\nl: [] \n", "a: 1.0\nb: -\n"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		sameAsYAML(t, doc)
	})
}

// The documents the fast path reads are decoded into the same objects as
// the universal deserializer decodes them.
func TestFastDecodeMatchesTheDeserializer(t *testing.T) {
	dir := t.TempDir()
	writeLargeSnapshot(t, dir, 3, 2, 2)
	var raws []rawDocument
	for _, name := range []string{"nodes.yaml", "workloads.yaml", "pods.yaml"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, split(name, data)...)
	}
	var c converter
	for _, raw := range raws {
		fast, err := decodeDocument(&c, raw)
		if err != nil || len(fast) != 1 {
			t.Fatalf("fast: %v (%d objects)", err, len(fast))
		}
		data, err := yaml.YAMLToJSON(raw.data)
		if err != nil {
			t.Fatal(err)
		}
		slow, err := decodeObject(raw.file, raw.line, data)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fast[0].Object, slow.Object) {
			t.Fatalf("the fast decode differs for %s:%d:\nfast: %#v\nslow: %#v", raw.file, raw.line, fast[0].Object, slow.Object)
		}
	}
}
