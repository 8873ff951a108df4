package clusterstate

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/targets"
)

// A workload as it runs now: the object, the ReplicaSets it controls,
// read through the cache's controller index, and its pods, from the
// engine's records. The migration reconciler and the admission check read
// workloads so.

// ControllerUIDField indexes ReplicaSets by the UID of their controller,
// so that a Deployment's are found without reading every ReplicaSet of
// the namespace. Pods have the same index in the engine's records.
const ControllerUIDField = ".metadata.controllerUID"

// indexOwners registers the controller index of ReplicaSets with the
// manager's cache.
func indexOwners(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &appsv1.ReplicaSet{}, ControllerUIDField, ControllerUID); err != nil {
		return fmt.Errorf("index ReplicaSets by controller: %w", err)
	}
	return nil
}

// ControllerUID is the value of an object in the controller index.
func ControllerUID(o client.Object) []string {
	if ref := metav1.GetControllerOf(o); ref != nil {
		return []string{string(ref.UID)}
	}
	return nil
}

// Live is the Target of a workload object with what it controls now: its
// ReplicaSets, read from reader through the controller index, and the pods of
// it or of them from the engine's records. An object not created yet has
// none.
func (c *ClusterState) Live(ctx context.Context, reader client.Reader, obj client.Object) (*targets.Target, error) {
	var replicaSets []*appsv1.ReplicaSet
	owners := []types.UID{}
	if uid := obj.GetUID(); uid != "" {
		var err error
		if replicaSets, err = ownedReplicaSets(ctx, reader, obj); err != nil {
			return nil, err
		}
		for _, rs := range replicaSets {
			owners = append(owners, rs.UID)
		}
		owners = append(owners, uid)
	}
	t := targets.Build(obj, replicaSets, c.PodsControlledBy(obj.GetNamespace(), owners...))
	if t == nil {
		return nil, fmt.Errorf("%T is not a workload placement-guard migrates", obj)
	}
	return t, nil
}

// ownedReplicaSets are the ReplicaSets a workload controls (a
// Deployment's; none of any other kind), read without a deep copy:
// nothing may change them.
func ownedReplicaSets(ctx context.Context, c client.Reader, owner client.Object) ([]*appsv1.ReplicaSet, error) {
	var list appsv1.ReplicaSetList
	if err := c.List(ctx, &list, client.InNamespace(owner.GetNamespace()), client.MatchingFields{ControllerUIDField: string(owner.GetUID())}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list ReplicaSets of %s/%s: %w", owner.GetNamespace(), owner.GetName(), err)
	}
	out := make([]*appsv1.ReplicaSet, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}
