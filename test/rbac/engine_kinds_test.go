package rbac

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/placement-guard/placement-guard/internal/placement"
)

// The manager reads, and the plugin lists, every kind of object the
// engine reads (placement.ObjectKinds, the one list of them): a kind added
// to the engine without its permission would leave the operator's view,
// or a plan, without it.
func TestTheRolesReadEveryKindTheEngineReads(t *testing.T) {
	for file, verbs := range map[string][]string{
		filepath.Join("config", "rbac", "role.yaml"):   {"list", "watch"},
		filepath.Join("config", "plugin", "rbac.yaml"): {"list"},
	} {
		rules := rulesIn(t, filepath.Join("..", "..", file))
		for _, k := range placement.ObjectKinds {
			for _, verb := range verbs {
				if !grants(rules, k.Group, k.Resource, verb) {
					t.Errorf("%s does not grant %s on %s (group %q), which the engine reads", file, verb, k.Resource, k.Group)
				}
			}
		}
	}
}

// rulesIn are the rules of every ClusterRole and Role in a YAML file.
func rulesIn(t *testing.T, path string) []rbacv1.PolicyRule {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rules []rbacv1.PolicyRule
	for _, doc := range bytes.Split(raw, []byte("\n---")) {
		var role struct {
			Kind  string              `json:"kind"`
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		if err := yaml.Unmarshal(doc, &role); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if role.Kind == "ClusterRole" || role.Kind == "Role" {
			rules = append(rules, role.Rules...)
		}
	}
	return rules
}

func grants(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
			return true
		}
	}
	return false
}
