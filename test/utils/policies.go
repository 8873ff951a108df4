package utils

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// deployedOperatorUser is the user config/policies names: the
// ServiceAccount config/default deploys the manager as.
const deployedOperatorUser = "system:serviceaccount:placement-guard-system:placement-guard-controller-manager"

// InstallPolicies creates the admission policies of config/policies (the
// directory dir) and their bindings, naming user as the operator, so that
// a suite's operator runs under the policies a user is told to install.
func InstallPolicies(ctx context.Context, c client.Client, dir, user string) error {
	var kustomization struct {
		Resources []string `json:"resources"`
	}
	if err := decodeFile(filepath.Join(dir, "kustomization.yaml"), &kustomization); err != nil {
		return err
	}
	for _, file := range kustomization.Resources {
		raw, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			return err
		}
		raw = []byte(strings.ReplaceAll(string(raw), deployedOperatorUser, user))
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
		for {
			obj := &unstructured.Unstructured{}
			if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return fmt.Errorf("read %s: %w", file, err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create %s %s from %s: %w", obj.GetKind(), obj.GetName(), file, err)
			}
		}
	}
	return nil
}
