package health

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// The kube-state-metrics configuration names status fields by path; a path
// that is not in the CRD's schema exports nothing, silently. Check each one.

type ksmConfig struct {
	Kind string `json:"kind"`
	Spec struct {
		Resources []struct {
			GroupVersionKind struct{ Group, Version, Kind string } `json:"groupVersionKind"`
			LabelsFromPath   map[string][]string                   `json:"labelsFromPath"`
			Metrics          []struct {
				Name string `json:"name"`
				Help string `json:"help"`
				Each struct {
					Type  string `json:"type"`
					Gauge *struct {
						Path           []string            `json:"path"`
						ValueFrom      []string            `json:"valueFrom"`
						LabelsFromPath map[string][]string `json:"labelsFromPath"`
					} `json:"gauge"`
					StateSet *struct {
						Path []string `json:"path"`
						List []string `json:"list"`
					} `json:"stateSet"`
				} `json:"each"`
			} `json:"metrics"`
		} `json:"resources"`
	} `json:"spec"`
}

func TestKubeStateMetricsPathsExistInTheCRD(t *testing.T) {
	var crd apiextensionsv1.CustomResourceDefinition
	readYAML(t, filepath.Join("..", "..", "config", "crd", "bases", "placementguard.io_placementmigrations.yaml"), &crd)
	var cfg ksmConfig
	readYAML(t, filepath.Join("..", "..", "config", "kube-state-metrics", "placementmigration.yaml"), &cfg)
	if cfg.Kind != "CustomResourceStateMetrics" || len(cfg.Spec.Resources) != 1 {
		t.Fatalf("want one CustomResourceStateMetrics resource, got %+v", cfg)
	}
	res := cfg.Spec.Resources[0]
	version := crd.Spec.Versions[0]
	if res.GroupVersionKind.Group != crd.Spec.Group || res.GroupVersionKind.Version != version.Name || res.GroupVersionKind.Kind != crd.Spec.Names.Kind {
		t.Fatalf("the configuration is for %+v, the CRD serves %s/%s %s", res.GroupVersionKind, crd.Spec.Group, version.Name, crd.Spec.Names.Kind)
	}
	root := version.Schema.OpenAPIV3Schema
	for _, path := range res.LabelsFromPath {
		mustExist(t, root, path)
	}
	seen := map[string]bool{}
	for _, m := range res.Metrics {
		if seen[m.Name] || m.Help == "" {
			t.Errorf("metric %q: names must be unique and every metric needs help", m.Name)
		}
		seen[m.Name] = true
		switch {
		case m.Each.Gauge != nil:
			field := mustExist(t, root, m.Each.Gauge.Path)
			if field != nil && field.Type == "array" {
				field = field.Items.Schema
			}
			if field == nil {
				continue
			}
			for _, path := range m.Each.Gauge.LabelsFromPath {
				mustExist(t, field, path)
			}
			if v := m.Each.Gauge.ValueFrom; v != nil {
				mustExist(t, field, v)
			} else if field.Type != "integer" && field.Type != "number" {
				t.Errorf("metric %s: %s is a %s, not a number", m.Name, strings.Join(m.Each.Gauge.Path, "."), field.Type)
			}
		case m.Each.StateSet != nil:
			field := mustExist(t, root, m.Each.StateSet.Path)
			if field == nil {
				continue
			}
			var enum []string
			for _, e := range field.Enum {
				enum = append(enum, strings.Trim(string(e.Raw), `"`))
			}
			if !slices.Equal(enum, m.Each.StateSet.List) {
				t.Errorf("metric %s lists %v, the CRD's enum is %v", m.Name, m.Each.StateSet.List, enum)
			}
		default:
			t.Errorf("metric %s has neither a gauge nor a state set", m.Name)
		}
	}
	for _, want := range []string{"phase", "condition", "qualifying_nodes", "required_nodes"} {
		if !seen[want] {
			t.Errorf("metric %s is missing", want)
		}
	}
}

// mustExist walks the schema along path; metadata's fields are the API
// server's, not in the CRD schema.
func mustExist(t *testing.T, s *apiextensionsv1.JSONSchemaProps, path []string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	if len(path) == 2 && path[0] == "metadata" && (path[1] == "name" || path[1] == "namespace") {
		return &apiextensionsv1.JSONSchemaProps{Type: "string"}
	}
	for i, p := range path {
		child, ok := s.Properties[p]
		if !ok {
			t.Errorf("path %s: %q is not in the CRD schema", strings.Join(path, "."), strings.Join(path[:i+1], "."))
			return nil
		}
		s = &child
	}
	return s
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, into); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
}
