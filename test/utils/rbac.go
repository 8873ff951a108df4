package utils

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// OperatorAccount is the ServiceAccount config/rbac grants the manager's
// permissions to, before config/default prefixes and places it.
const (
	OperatorAccountNamespace = "system"
	OperatorAccountName      = "controller-manager"
)

// OperatorUser is the user name the API server gives OperatorAccount.
func OperatorUser() string {
	return "system:serviceaccount:" + OperatorAccountNamespace + ":" + OperatorAccountName
}

// GrantOperatorRBAC creates everything config/rbac lists in its
// kustomization (the ServiceAccount, the ClusterRole generated from the
// kubebuilder markers and the bindings) in the cluster c reaches, so that
// an operator impersonating OperatorUser has exactly the permissions a
// deployed one has.
func GrantOperatorRBAC(ctx context.Context, c client.Client, rbacDir string) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: OperatorAccountNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return createKustomized(ctx, c, rbacDir, nil)
}

// createKustomized creates every object of the files a kustomization in
// dir lists, each file's text passed through edit first when it is set.
func createKustomized(ctx context.Context, c client.Client, dir string, edit func([]byte) []byte) error {
	var kustomization struct {
		Resources []string `json:"resources"`
	}
	if err := decodeFile(filepath.Join(dir, "kustomization.yaml"), &kustomization); err != nil {
		return err
	}
	for _, file := range kustomization.Resources {
		path := filepath.Join(dir, file)
		if info, err := os.Stat(path); err == nil && info.IsDir() {
			// A kustomization of its own, created as its files say.
			if err := createKustomized(ctx, c, path, edit); err != nil {
				return err
			}
			continue
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if edit != nil {
			raw = edit(raw)
		}
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

func decodeFile(path string, into any) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(into); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}

// PlaceholderRole is the opt-in ClusterRole of config/rbac that lets the
// operator create and delete placeholder Deployments, before config/default
// prefixes it.
const PlaceholderRole = "placeholders"

// BindPlaceholderRole binds PlaceholderRole to OperatorAccount in one
// namespace, as docs/operations.md tells a user whose migrations there use
// mode PlaceholderPods.
func BindPlaceholderRole(ctx context.Context, c client.Client, namespace string) error {
	return bindOptInRole(ctx, c, namespace, PlaceholderRole)
}

// RebalanceRole is the opt-in ClusterRole of config/rbac that lets the
// operator keep deletion costs on pods, before config/default prefixes it.
const RebalanceRole = "rebalance"

// BindRebalanceRole binds RebalanceRole to OperatorAccount in one
// namespace, as docs/operations.md tells a user whose migrations there use
// spec.rebalance.mode DeletionCost.
func BindRebalanceRole(ctx context.Context, c client.Client, namespace string) error {
	return bindOptInRole(ctx, c, namespace, RebalanceRole)
}

// EvictRole is the opt-in ClusterRole of config/rbac that lets the operator
// evict pods, before config/default prefixes it.
const EvictRole = "evict"

// BindEvictRole binds EvictRole to OperatorAccount in one namespace, as
// docs/operations.md tells a user whose migrations there use mode Evict or
// guards.evictStuckPods.
func BindEvictRole(ctx context.Context, c client.Client, namespace string) error {
	return bindOptInRole(ctx, c, namespace, EvictRole)
}

// bindOptInRole binds one of config/rbac's opt-in ClusterRoles to
// OperatorAccount in namespace.
func bindOptInRole(ctx context.Context, c client.Client, namespace, role string) error {
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "placement-guard-" + role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: OperatorAccountNamespace, Name: OperatorAccountName}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
	}
	if err := c.Create(ctx, rb); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("bind ClusterRole %s in %s: %w", role, namespace, err)
	}
	return nil
}
