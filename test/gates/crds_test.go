package gates

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// fleetObjects reads every object of a config/fleet file.
func fleetObjects(t *testing.T, name string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "fleet", name))
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, &u)
		}
	}
}

// dryRun creates the object as a server-side dry run with strict field
// validation: an unknown or duplicated field is refused, not dropped.
func (s *server) dryRun(ctx context.Context, u *unstructured.Unstructured) error {
	gvk := u.GroupVersionKind()
	mapping, err := s.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	_, err = s.dynamic.Resource(mapping.Resource).Namespace(u.GetNamespace()).Create(ctx, u,
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict})
	return err
}

// carried are the PlacementMigrations an OCM ManifestWork (or the template
// of a ManifestWorkReplicaSet) delivers.
func carried(t *testing.T, u *unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	path := []string{"spec", "workload", "manifests"}
	if u.GetKind() == "ManifestWorkReplicaSet" {
		path = []string{"spec", "manifestWorkTemplate", "workload", "manifests"}
	}
	manifests, found, err := unstructured.NestedSlice(u.Object, path...)
	if err != nil || !found {
		t.Fatalf("%s %s carries no manifests at %s: %v", u.GetKind(), u.GetName(), strings.Join(path, "."), err)
	}
	var out []*unstructured.Unstructured
	for _, m := range manifests {
		out = append(out, &unstructured.Unstructured{Object: m.(map[string]any)})
	}
	return out
}

// Every object of config/fleet is accepted by its tool's own CRD on a real
// API server, and every migration a ManifestWork carries by placement-guard's.
func TestEveryFleetFileOnTheToolsCRDs(t *testing.T) {
	s := apiServer(t)
	ctx := context.Background()
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "fleet", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fleet files: %v", err)
	}
	applied := 0
	for _, f := range files {
		for _, u := range fleetObjects(t, filepath.Base(f)) {
			name := filepath.Base(f) + ": " + u.GetKind() + " " + u.GetName()
			if module, ok := notServed[u.GroupVersionKind().GroupKind()]; ok {
				t.Logf("%s: %s's CRD is not served by the module proxy; checked in test/health", name, module)
				if u.GroupVersionKind().Group != "work.open-cluster-management.io" {
					continue
				}
				for _, m := range carried(t, u) {
					if err := s.dryRun(ctx, m); err != nil {
						t.Errorf("%s carries a migration the API server refuses: %v", name, err)
					}
					applied++
				}
				continue
			}
			if err := s.dryRun(ctx, u); err != nil {
				t.Errorf("%s refused: %v", name, err)
			}
			applied++
		}
	}
	if applied < 5 {
		t.Errorf("only %d objects applied", applied)
	}
}

// Strict validation is what makes the test above worth anything: a field
// the tool does not know is refused, as a misspelt gate would be.
func TestAnUnknownFieldIsRefused(t *testing.T) {
	s := apiServer(t)
	for _, file := range []string{"flux-kustomizations.yaml", "argocd-applicationset.yaml"} {
		u := fleetObjects(t, file)[0]
		if err := unstructured.SetNestedField(u.Object, "yes", "spec", "waitForPlacement"); err != nil {
			t.Fatal(err)
		}
		err := s.dryRun(context.Background(), u)
		if err == nil || !strings.Contains(err.Error(), "waitForPlacement") {
			t.Errorf("%s with an unknown field: %v, want it refused", file, err)
		}
	}
}
