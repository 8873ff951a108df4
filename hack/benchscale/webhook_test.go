package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/placement-guard/placement-guard/test/localcluster"
)

// The stream's manager is registered with what config/default installs:
// its rules, selectors and policy, sent to the manager by URL.
func TestShippedCheckIsTheInstalledOne(t *testing.T) {
	bin, err := localcluster.FindBinaries()
	if err != nil {
		t.Fatalf("the tests' binaries (make test builds them): %v", err)
	}
	cfg, err := shippedCheck(filepath.Join(bin, "kustomize"), filepath.Join("..", "..", "config", "default"), "bench-admission", 19443, []byte("bundle"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Name != "bench-admission" || len(cfg.Webhooks) != 1 {
		t.Fatalf("got %s with %d webhooks, want bench-admission with the one check", cfg.Name, len(cfg.Webhooks))
	}
	w := cfg.Webhooks[0]
	if w.ClientConfig.URL == nil || *w.ClientConfig.URL != "https://127.0.0.1:19443/validate-workloads" || w.ClientConfig.Service != nil {
		t.Errorf("client config %+v, want the check's path at 127.0.0.1:19443 by URL", w.ClientConfig)
	}
	if string(w.ClientConfig.CABundle) != "bundle" {
		t.Errorf("caBundle %q, want the harness's", w.ClientConfig.CABundle)
	}
	if len(w.Rules) != 1 || !slices.Contains(w.Rules[0].Resources, "deployments/scale") {
		t.Errorf("rules %+v, want the installed ones (scale included)", w.Rules)
	}
	if w.NamespaceSelector == nil || !strings.Contains(w.NamespaceSelector.String(), "kube-system") {
		t.Errorf("namespace selector %v, want the installed one that leaves kube-system out", w.NamespaceSelector)
	}
}

func TestValidatingConfigurationIsTheOneRendered(t *testing.T) {
	two := `apiVersion: v1
kind: Namespace
metadata: {name: a}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: one}
webhooks: []
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: two}
`
	if _, err := validatingConfiguration([]byte(two)); err == nil || !strings.Contains(err.Error(), "two ValidatingWebhookConfigurations") {
		t.Errorf("two configurations: got %v, want an error naming both", err)
	}
	if _, err := validatingConfiguration([]byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n")); err == nil {
		t.Error("no configuration: got none, want an error")
	}
	cfg, err := validatingConfiguration([]byte(strings.SplitN(two, "---\n", 3)[1]))
	if err != nil || cfg.Name != "one" {
		t.Errorf("one configuration: got %v, %v", cfg, err)
	}
	if _, err := pointAt(cfg.DeepCopy(), "x", 1, nil); err != nil {
		t.Errorf("no webhooks to point: %v", err)
	}
}
