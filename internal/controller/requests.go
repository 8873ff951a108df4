package controller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/provision"
)

// requestManager is the field manager of capacity requests.
const requestManager = "placement-guard-capacity"

// ensureRequest creates the request's objects that do not exist, with
// server-side apply, and resizes the primary one to the replicas asked
// for, and returns the autoscaler's word on it, read from the API server.
// An existing request keeps its template: the placeholders that found a
// node stay on it, where a changed template would move them.
func (r *PlacementMigrationReconciler) ensureRequest(ctx context.Context, req provision.Request) (string, error) {
	objs, err := provision.Objects(req)
	if err != nil {
		return "", err
	}
	// Create nothing unless every kind is served: a PodTemplate without
	// its CapacityBuffer would ask for nothing.
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		if _, err := r.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			return "", fmt.Errorf("find the %s API: %w", gvk.Kind, err)
		}
	}
	var live *unstructured.Unstructured
	for _, u := range objs {
		found := &unstructured.Unstructured{}
		found.SetGroupVersionKind(u.GroupVersionKind())
		err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(u), found)
		switch {
		case apierrors.IsNotFound(err):
			if err := r.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(requestManager), client.ForceOwnership); err != nil {
				return "", fmt.Errorf("create %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
			}
			if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(u), found); err != nil {
				return "", fmt.Errorf("read back %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
			}
		case err != nil:
			return "", fmt.Errorf("read %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
		live = found
	}
	if replicas, ok, _ := unstructured.NestedInt64(live.Object, "spec", "replicas"); !ok || replicas != int64(req.Replicas) {
		patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, req.Replicas))
		if err := r.Patch(ctx, live, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(requestManager)); err != nil {
			return "", fmt.Errorf("resize %s %s/%s to %d: %w", live.GetKind(), live.GetNamespace(), live.GetName(), req.Replicas, err)
		}
	}
	return provision.Word(live), nil
}

// deleteRequest deletes a recorded request's objects; one already gone, or
// of a kind the cluster no longer serves, is deleted.
func (r *PlacementMigrationReconciler) deleteRequest(ctx context.Context, namespace, kind, name string) error {
	for _, u := range provision.Owned(kind, namespace, name) {
		err := r.Delete(ctx, u, client.PropagationPolicy("Background"))
		if err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
			return fmt.Errorf("delete %s %s/%s: %w", u.GetKind(), namespace, name, err)
		}
	}
	return nil
}
