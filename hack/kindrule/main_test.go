package main

import (
	"go/parser"
	"go/token"
	"testing"
)

// Inside the engine, a kind is named by its own file and the declaration
// of the kinds alone; a field of the same name is not a kind.
func TestTheEnginesKindsAreNamedByTheirFilesAlone(t *testing.T) {
	for path, want := range map[string]bool{
		"internal/placement/rollout.go":         true,
		"internal/placement/kind_deployment.go": false,
		"internal/placement/workload.go":        false,
		"internal/placement/benchcluster/b.go":  false,
		"internal/planning/question.go":         false,
	} {
		if got := inEngine(path); got != want {
			t.Errorf("inEngine(%s) = %v, want %v", path, got, want)
		}
	}
	src := `package placement
type other struct{ StatefulSet string }
func f(w *Workload, o other) bool { return w.Kind == Deployment || o.StatefulSet == "" }
var k = map[WorkloadKind]int{StatefulSet: 1}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "rollout.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	hits := engineKindNames(fset, f)
	if len(hits) != 2 {
		t.Fatalf("%d hits, want the comparison and the map key: %v", len(hits), hits)
	}
}
