// Package rbac pins the manager's permissions: the ClusterRole generated
// from the kubebuilder markers must equal the reviewed golden file, so that
// a new permission is a visible change of testdata in review.
package rbac

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden file from config/rbac/role.yaml")

const golden = "testdata/manager-role.rules.golden.yaml"

func TestManagerRoleMatchesTheReviewedRules(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(raw, &role); err != nil {
		t.Fatal(err)
	}
	got, err := yaml.Marshal(role.Rules)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("the manager's ClusterRole changed; review the change and run `go test ./test/rbac -update`:\n--- want\n%s\n--- got\n%s", want, got)
	}
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			if res == "secrets" {
				t.Fatal("the manager must not read secrets")
			}
		}
		for _, v := range r.Verbs {
			if v == "*" || (v == "update" && contains(r.APIGroups, "apps")) {
				t.Fatalf("rule %+v: no wildcards, and workloads are patched, never updated", r)
			}
		}
	}
}

func contains(items []string, s string) bool {
	for _, i := range items {
		if i == s {
			return true
		}
	}
	return false
}
