package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// controllerUIDField indexes pods and ReplicaSets by the UID of their
// controller, so that a workload's pods are found without reading every
// pod of the namespace.
const controllerUIDField = ".metadata.controllerUID"

// indexOwners registers the controller index of pods and ReplicaSets
// with the manager's cache.
func indexOwners(ctx context.Context, indexer client.FieldIndexer) error {
	for _, obj := range []client.Object{&corev1.Pod{}, &appsv1.ReplicaSet{}} {
		if err := indexer.IndexField(ctx, obj, controllerUIDField, controllerUID); err != nil {
			return fmt.Errorf("index %T by controller: %w", obj, err)
		}
	}
	return nil
}

// controllerUID is the value of an object in the controller index.
func controllerUID(o client.Object) []string {
	if ref := metav1.GetControllerOf(o); ref != nil {
		return []string{string(ref.UID)}
	}
	return nil
}

// ownedPods are the live (not terminating) pods the controllers of uids
// control. They are the cache's own objects, read without a deep copy:
// nothing may change them.
func (r *PlacementMigrationReconciler) ownedPods(ctx context.Context, namespace string, uids ...types.UID) ([]*corev1.Pod, error) {
	var out []*corev1.Pod
	for _, uid := range uids {
		var list corev1.PodList
		if err := r.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{controllerUIDField: string(uid)}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("list pods of %s in %s: %w", uid, namespace, err)
		}
		for i := range list.Items {
			if list.Items[i].DeletionTimestamp == nil {
				out = append(out, &list.Items[i])
			}
		}
	}
	return out, nil
}

// ownedReplicaSets are the ReplicaSets a Deployment controls, read from
// the cache without a deep copy: nothing may change them.
func (r *PlacementMigrationReconciler) ownedReplicaSets(ctx context.Context, d *appsv1.Deployment) ([]*appsv1.ReplicaSet, error) {
	var list appsv1.ReplicaSetList
	if err := r.List(ctx, &list, client.InNamespace(d.Namespace), client.MatchingFields{controllerUIDField: string(d.UID)}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list ReplicaSets of Deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	return pointers(list.Items), nil
}

func uidsOf(replicaSets []*appsv1.ReplicaSet) []types.UID {
	out := make([]types.UID, len(replicaSets))
	for i, rs := range replicaSets {
		out[i] = rs.UID
	}
	return out
}
