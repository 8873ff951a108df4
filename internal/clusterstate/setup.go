package clusterstate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Setup builds the engine's cluster state on mgr: the snapshot, fed by
// the manager's informers for the storage kinds and namespaces and by
// feeds of its own for pods and nodes, paced at readEvery while no
// migration is at work (DefaultFeedReadInterval; zero reads each event as
// it arrives), and the cache's controller index of ReplicaSets (Live).
// The feeds run on every replica, leader or not.
func Setup(mgr manager.Manager, readEvery time.Duration) (*ClusterState, Feeds, error) {
	state := NewClusterState()
	if err := state.Watch(context.Background(), mgr.GetCache()); err != nil {
		return nil, nil, err
	}
	if err := indexOwners(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return nil, nil, err
	}
	pods, err := NewPodFeed(mgr.GetConfig(), state, readEvery)
	if err != nil {
		return nil, nil, err
	}
	nodes, err := NewNodeFeed(mgr.GetConfig(), state, readEvery)
	if err != nil {
		return nil, nil, err
	}
	if err := errors.Join(mgr.Add(pods), mgr.Add(nodes)); err != nil {
		return nil, nil, fmt.Errorf("add the engine's feeds: %w", err)
	}
	return state, NewFeeds(pods, nodes), nil
}
