package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSwitchesOnAKindAreFoundAndOthersAreNot(t *testing.T) {
	src := `package x

import (
	apps "k8s.io/api/apps/v1"
	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/provision"
)

func f(o any, k placement.WorkloadKind, r pgv1.TargetRef, s string) {
	switch o.(type) {
	case *apps.StatefulSet: // found
	case *apps.ReplicaSet:
	}
	switch k {
	case placement.Deployment: // found
	}
	_ = r.Kind == pgv1.KindStatefulSet // found
	_ = s != "Deployment"              // found
	_ = s == provision.KindDeployment
	_ = s == "DaemonSet"
	_ = placement.Deployment
}
`
	path := filepath.Join(t.TempDir(), "x.go")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	hits, err := check(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"*appsv1.StatefulSet", "placement.Deployment", "pgv1.KindStatefulSet", `"Deployment"`}
	if len(hits) != len(want) {
		t.Fatalf("found %d switches, want %d:\n%s", len(hits), len(want), strings.Join(hits, "\n"))
	}
	for i, w := range want {
		if !strings.HasSuffix(hits[i], w) {
			t.Errorf("hit %d = %q, want one on %s", i, hits[i], w)
		}
	}
}
