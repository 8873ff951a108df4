package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/provision"
)

// requestManager is the field manager of capacity requests.
const requestManager = "placement-guard-capacity"

// nameTakenError is an object of a request's name that this migration did
// not create: the request is not made, and the object is left as it is.
type nameTakenError struct {
	kind, namespace, name, owner string
}

func (e *nameTakenError) Error() string {
	return fmt.Sprintf("%s %s/%s already exists and is not this migration's (%s)", e.kind, e.namespace, e.name, e.owner)
}

// ensureRequest creates the request's objects that do not exist and
// resizes the primary one to the replicas asked for, and returns the
// autoscaler's word on it, read from the API server. An object of the
// request's name that the migration does not own is never written: the
// request fails with a nameTakenError. An existing request keeps its
// template: the placeholders that found a node stay on it, where a
// changed template would move them.
func (r *PlacementMigrationReconciler) ensureRequest(ctx context.Context, req provision.Request) (word string, failing bool, err error) {
	objs, err := provision.Objects(req)
	if err != nil {
		return "", false, err
	}
	// Create nothing unless every kind is served: a PodTemplate without
	// its CapacityBuffer would ask for nothing.
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		if _, err := r.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			return "", false, fmt.Errorf("find the %s API: %w", gvk.Kind, err)
		}
	}
	var live *unstructured.Unstructured
	for _, u := range objs {
		if live, err = r.ownRequestObject(ctx, u, req.Owner.UID); err != nil {
			return "", false, err
		}
	}
	replicas, ok, _ := unstructured.NestedInt64(live.Object, "spec", "replicas")
	// A placeholder Deployment made before it was exempt from the
	// admission check is given the labels that exempt it as it is resized.
	exempt := req.Mode != pgv1.ProvisionPlaceholderPods || provision.IsExempt(live)
	if !ok || replicas != int64(req.Replicas) || !exempt {
		// The uid and resourceVersion make the patch a precondition: an
		// object deleted and re-created by someone else since it was
		// read is refused, not resized.
		patch, err := resizePatch(live, req.Replicas, !exempt)
		if err != nil {
			return "", false, err
		}
		if err := r.Patch(ctx, live, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(requestManager)); err != nil {
			if apierrors.IsConflict(err) {
				return "", false, fmt.Errorf("resize %s %s/%s: %w", live.GetKind(), live.GetNamespace(), live.GetName(), errStale)
			}
			return "", false, fmt.Errorf("resize %s %s/%s to %d: %w", live.GetKind(), live.GetNamespace(), live.GetName(), req.Replicas, err)
		}
	}
	word, failing = provision.Word(live)
	return word, failing, nil
}

// resizePatch is the merge patch that sets a request object's replicas,
// and the labels that exempt it from the admission check when exempt is
// set, carrying its uid and resourceVersion as preconditions.
func resizePatch(live *unstructured.Unstructured, replicas int32, exempt bool) ([]byte, error) {
	metadata := map[string]any{"uid": live.GetUID(), "resourceVersion": live.GetResourceVersion()}
	if exempt {
		metadata["labels"] = provision.Exempt()
	}
	patch, err := json.Marshal(map[string]any{"metadata": metadata, "spec": map[string]any{"replicas": replicas}})
	if err != nil {
		return nil, fmt.Errorf("resize %s %s/%s: %w", live.GetKind(), live.GetNamespace(), live.GetName(), err)
	}
	return patch, nil
}

// ownRequestObject returns the live object u names, created when missing.
// It is created, never applied over: an object someone else made in the
// meantime makes the create fail instead of being taken over.
func (r *PlacementMigrationReconciler) ownRequestObject(ctx context.Context, u *unstructured.Unstructured, owner types.UID) (*unstructured.Unstructured, error) {
	found := &unstructured.Unstructured{}
	found.SetGroupVersionKind(u.GroupVersionKind())
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(u), found)
	if apierrors.IsNotFound(err) {
		created := u.DeepCopy()
		err = r.Create(ctx, created, client.FieldOwner(requestManager))
		if err == nil {
			return created, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
		err = r.APIReader.Get(ctx, client.ObjectKeyFromObject(u), found)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	if !provision.OwnedBy(found, owner) {
		return nil, &nameTakenError{kind: u.GetKind(), namespace: u.GetNamespace(), name: u.GetName(), owner: provision.Owner(found)}
	}
	return found, nil
}

// deleteRequest deletes a recorded request's objects that the migration
// owns; one already gone, or of a kind the cluster no longer serves, is
// deleted. An object of that name someone else made is left alone and
// named in the result. The delete carries the uid read as a precondition,
// so an object re-created by someone else meanwhile survives it.
func (r *PlacementMigrationReconciler) deleteRequest(ctx context.Context, namespace, kind, name string, owner types.UID) ([]string, error) {
	var leftAlone []string
	for _, u := range provision.Owned(kind, namespace, name) {
		err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(u), u)
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s %s/%s: %w", u.GetKind(), namespace, name, err)
		}
		if !provision.OwnedBy(u, owner) {
			leftAlone = append(leftAlone, fmt.Sprintf("%s %s (%s)", u.GetKind(), name, provision.Owner(u)))
			continue
		}
		uid := u.GetUID()
		err = r.Delete(ctx, u, client.PropagationPolicy("Background"), client.Preconditions{UID: &uid})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return nil, fmt.Errorf("delete %s %s/%s: %w", u.GetKind(), namespace, name, err)
		}
	}
	return leftAlone, nil
}

// asNameTaken unwraps a nameTakenError.
func asNameTaken(err error) (*nameTakenError, bool) {
	var taken *nameTakenError
	ok := errors.As(err, &taken)
	return taken, ok
}
