package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/placement-guard/placement-guard/internal/certs"
)

// The stream's manager is reached as the installation reaches it: its
// admission check is registered with the ValidatingWebhookConfiguration
// `kustomize build config/default` renders (its rules, selectors, timeout
// and failure policy), pointed at the manager by URL instead of its
// Service, as docs/operations.md tells for a manager run outside the
// cluster. A manager of any commit then answers the configuration it
// shipped with, under the same harness.

// shippedCheck renders installConfig with kustomize and returns its
// ValidatingWebhookConfiguration, named name and sent to 127.0.0.1:port
// with caBundle.
func shippedCheck(kustomize, installConfig, name string, port int, caBundle []byte) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	out, err := exec.Command(kustomize, "build", installConfig).Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return nil, fmt.Errorf("kustomize build %s: %w: %s", installConfig, err, exit.Stderr)
		}
		return nil, fmt.Errorf("kustomize build %s (make bench-scale builds kustomize): %w", installConfig, err)
	}
	cfg, err := validatingConfiguration(out)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", installConfig, err)
	}
	return pointAt(cfg, name, port, caBundle)
}

// validatingConfiguration finds the one ValidatingWebhookConfiguration
// among rendered manifests.
func validatingConfiguration(manifests []byte) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	var found *admissionregistrationv1.ValidatingWebhookConfiguration
	for {
		obj := &unstructured.Unstructured{}
		if err := decoder.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("read the rendered manifests: %w", err)
		}
		if obj.GetKind() != "ValidatingWebhookConfiguration" {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("two ValidatingWebhookConfigurations: %s and %s", found.Name, obj.GetName())
		}
		found = &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, found); err != nil {
			return nil, fmt.Errorf("read %s: %w", obj.GetName(), err)
		}
	}
	if found == nil {
		return nil, errors.New("no ValidatingWebhookConfiguration among the rendered manifests")
	}
	return found, nil
}

// pointAt renames cfg and sends each of its webhooks to the path its
// Service would be asked on, at 127.0.0.1:port, trusting caBundle.
func pointAt(cfg *admissionregistrationv1.ValidatingWebhookConfiguration, name string, port int, caBundle []byte) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	cfg = cfg.DeepCopy()
	cfg.ObjectMeta = metav1.ObjectMeta{Name: name, Labels: cfg.Labels}
	for i := range cfg.Webhooks {
		w := &cfg.Webhooks[i]
		path := ""
		if w.ClientConfig.Service != nil && w.ClientConfig.Service.Path != nil {
			path = *w.ClientConfig.Service.Path
		}
		if !strings.HasPrefix(path, "/") {
			return nil, fmt.Errorf("webhook %s has no Service path to serve by URL", w.Name)
		}
		url := fmt.Sprintf("https://127.0.0.1:%d%s", port, path)
		w.ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caBundle}
	}
	return cfg, nil
}

// servingCert writes a self-signed serving certificate for 127.0.0.1 into
// dir, under the names the manager reads from --webhook-cert-path, and
// returns the bundle that trusts it.
func servingCert(dir string) ([]byte, error) {
	keys, err := certs.New([]string{"127.0.0.1", "localhost"}, time.Now(), 24*time.Hour)
	if err != nil {
		return nil, fmt.Errorf("make the check's serving certificate: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, certs.KeyCert), keys.Cert, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, certs.KeyKey), keys.Key, 0o600); err != nil {
		return nil, err
	}
	return keys.Bundle, nil
}
