package main

import (
	"strings"
	"testing"
)

func TestLayerOfIsTheFilesPrefix(t *testing.T) {
	for file, want := range map[string]int{
		"internal/placement/model_workload.go":      0,
		"internal/placement/index_snapshot.go":      1,
		"internal/placement/filter_evaluate.go":     2,
		"internal/placement/score_rank.go":          3,
		"internal/placement/sim_kind_deployment.go": 4,
		"internal/placement/ask_capacity.go":        5,
		"internal/placement/doc.go":                 -1,
		"internal/placement/simulate.go":            -1,
	} {
		if got := layerOf(file); got != want {
			t.Errorf("layerOf(%s) = %d, want %d", file, got, want)
		}
	}
}

// The fixture's files reach up in three ways (a constant, a type and a
// field of it) and down in others; one file is named by no layer.
func TestCheckFindsEveryUseFromALayerAbove(t *testing.T) {
	found, err := check("testdata/engine")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"index_store.go uses answer, declared in ask_answer.go",
		"index_store.go uses text, declared in ask_answer.go",
		"model_term.go uses asked, declared in ask_answer.go",
		"helpers.go: named by no layer",
	}
	all := strings.Join(found, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("missing %q in:\n%s", w, all)
		}
	}
	if len(found) != len(want) {
		t.Errorf("found %d, want %d:\n%s", len(found), len(want), all)
	}
}

func TestTheEngineKeepsItsLayers(t *testing.T) {
	found, err := check("../../internal/placement")
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Errorf("the engine's layers are broken:\n%s", strings.Join(found, "\n"))
	}
}
