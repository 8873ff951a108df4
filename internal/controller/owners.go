package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// controllerUIDField indexes ReplicaSets by the UID of their controller,
// so that a Deployment's are found without reading every ReplicaSet of
// the namespace. Pods have the same index in the engine's records.
const controllerUIDField = ".metadata.controllerUID"

// indexOwners registers the controller index of ReplicaSets with the
// manager's cache.
func indexOwners(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &appsv1.ReplicaSet{}, controllerUIDField, controllerUID); err != nil {
		return fmt.Errorf("index ReplicaSets by controller: %w", err)
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

// ownedReplicaSets are the ReplicaSets a workload controls (a
// Deployment's; none of any other kind), read from the cache without a
// deep copy: nothing may change them.
func (r *PlacementMigrationReconciler) ownedReplicaSets(ctx context.Context, owner client.Object) ([]*appsv1.ReplicaSet, error) {
	var list appsv1.ReplicaSetList
	if err := r.List(ctx, &list, client.InNamespace(owner.GetNamespace()), client.MatchingFields{controllerUIDField: string(owner.GetUID())}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list ReplicaSets of %s/%s: %w", owner.GetNamespace(), owner.GetName(), err)
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
