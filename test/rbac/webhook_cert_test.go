package rbac

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// TestCertificateRightsAreNamed: the rights to keep the admission check's
// certificate reach one Secret and one webhook configuration, by name, and
// the names are those config/default tells the manager to keep.
func TestCertificateRightsAreNamed(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "webhook_cert_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	patch, err := os.ReadFile(filepath.Join("..", "..", "config", "default", "manager_webhook_patch.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	flag := func(name string) string {
		for _, line := range strings.Split(string(patch), "\n") {
			if _, v, ok := strings.Cut(line, "value: --"+name+"="); ok {
				return strings.TrimSpace(v)
			}
		}
		t.Fatalf("config/default passes no --%s", name)
		return ""
	}
	secret, configuration, mutatingConfiguration := flag("webhook-cert-secret"), flag("webhook-configuration"), flag("mutating-webhook-configuration")

	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	seen := 0
	for {
		var role rbacv1.ClusterRole // a Role's fields are the same
		if err := dec.Decode(&role); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		for _, r := range role.Rules {
			seen++
			for _, v := range r.Verbs {
				if !slices.Contains([]string{"get", "list", "watch", "update", "create"}, v) {
					t.Errorf("%s: verb %s", role.Name, v)
				}
			}
			switch {
			case slices.Equal(r.Resources, []string{"secrets"}) && slices.Equal(r.Verbs, []string{"create"}):
				// Create cannot be limited to a name; the Role is namespaced.
				if role.Namespace == "" {
					t.Errorf("%s: creating secrets must be limited to the manager's namespace", role.Name)
				}
			case slices.Equal(r.Resources, []string{"secrets"}):
				if !slices.Equal(r.ResourceNames, []string{secret}) {
					t.Errorf("%s: secrets %v, want only %s, the Secret --webhook-cert-secret names", role.Name, r.ResourceNames, secret)
				}
			case slices.Equal(r.Resources, []string{"validatingwebhookconfigurations"}):
				if !slices.Equal(r.ResourceNames, []string{configuration}) {
					t.Errorf("%s: configurations %v, want only %s, the one --webhook-configuration names", role.Name, r.ResourceNames, configuration)
				}
			case slices.Equal(r.Resources, []string{"mutatingwebhookconfigurations"}):
				if !slices.Equal(r.ResourceNames, []string{mutatingConfiguration}) {
					t.Errorf("%s: configurations %v, want only %s, the one --mutating-webhook-configuration names", role.Name, r.ResourceNames, mutatingConfiguration)
				}
			default:
				t.Errorf("%s: unexpected rule %+v", role.Name, r)
			}
		}
	}
	if seen != 4 {
		t.Errorf("%d rules, want 4", seen)
	}
}
