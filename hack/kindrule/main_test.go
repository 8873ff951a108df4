package main

import (
	"go/parser"
	"go/token"
	"testing"
)

// Inside the engine, a kind is named by its own file alone; a field of the
// same name is not a kind.
func TestTheEnginesKindsAreNamedByTheirFilesAlone(t *testing.T) {
	for path, want := range map[string]bool{
		"internal/placement/sim_rollout.go":         true,
		"internal/placement/model_workload.go":      true,
		"internal/placement/sim_kind_deployment.go": false,
		"internal/placement/benchcluster/b.go":      false,
		"internal/planning/question.go":             false,
	} {
		if got := inEngine(path); got != want {
			t.Errorf("inEngine(%s) = %v, want %v", path, got, want)
		}
	}
	src := `package placement
import pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
type other struct{ KindStatefulSet string }
func f(w *Workload, o other) bool { return w.Kind == pgv1.KindDeployment || o.KindStatefulSet == "" }
var k = map[pgv1.WorkloadKind]int{pgv1.KindStatefulSet: 1}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "sim_rollout.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	hits := engineKindNames(fset, f, map[string]string{"pgv1": apiPath})
	if len(hits) != 2 {
		t.Fatalf("%d hits, want the comparison and the map key: %v", len(hits), hits)
	}
}
