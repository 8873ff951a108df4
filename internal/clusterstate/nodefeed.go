package clusterstate

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/placement-guard/placement-guard/internal/pacing"
	"github.com/placement-guard/placement-guard/internal/podwire"
)

// NodeFeed keeps the engine's nodes in step with the API server, as
// PodFeed its pods. Every node sends a status heartbeat every few dozen
// seconds, and a thousand nodes several a second, none of which changes an
// answer: taken straight into the snapshot, with nothing told unless what
// the engine reads changed (nodeChanged), a heartbeat costs a decoding
// and a comparison, where an informer would hand it through a queue and
// two goroutines to its handler.
type NodeFeed struct {
	*feed
	state *ClusterState
}

var _ manager.LeaderElectionRunnable = (*NodeFeed)(nil)

// NewNodeFeed returns the feed of every node of the cluster into state,
// paced as the pod feed (NewPodFeed). Nodes are decoded by podwire, which
// skips on the wire their managed fields, images, addresses and versions
// (podwire.TrimNode): most of a heartbeat's bytes.
func NewNodeFeed(cfg *rest.Config, state *ClusterState, readEvery time.Duration) (*NodeFeed, error) {
	lw, pacer, err := coreListWatch(cfg, "nodes", readEvery)
	if err != nil {
		return nil, err
	}
	return newNodeFeed(lw, state, pacer), nil
}

func newNodeFeed(lw toolscache.ListerWatcher, state *ClusterState, pacer *pacing.Pacer) *NodeFeed {
	return &NodeFeed{feed: newFeed("node", lw, pacer), state: state}
}

// Start lists and watches nodes until ctx ends.
func (f *NodeFeed) Start(ctx context.Context) error {
	f.run(ctx, &corev1.Node{}, &nodeStore{feed: f})
	return nil
}

// nodeStore is the node reflector's store: it hands each node, trimmed,
// to the snapshot. The reflector calls it from one goroutine.
type nodeStore struct {
	feed *NodeFeed
}

func (s *nodeStore) Add(obj any) error {
	s.feed.state.upsertNode(obj)
	return nil
}

func (s *nodeStore) Update(obj any) error {
	s.feed.state.upsertNode(obj)
	return nil
}

func (s *nodeStore) Delete(obj any) error {
	if n, ok := obj.(*corev1.Node); ok {
		s.feed.state.deleteNode(n)
	}
	return nil
}

// Replace takes in a full list: every node listed, and the deletion of
// every node the engine holds that the list lacks.
func (s *nodeStore) Replace(list []any, _ string) error {
	listed := make(map[string]struct{}, len(list))
	for _, obj := range list {
		if n, ok := obj.(*corev1.Node); ok {
			listed[n.Name] = struct{}{}
			s.feed.state.upsertNode(n)
		}
	}
	s.feed.state.dropNodesBut(listed)
	s.feed.listedAll()
	return nil
}

func (s *nodeStore) Resync() error { return nil }

// upsertNode takes a node in, trimmed to what the engine reads, and tells
// who listens when that changed.
func (c *ClusterState) upsertNode(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	// Decoded stripped already (podwire); a JSON answer is trimmed here.
	podwire.TrimNode(n)
	c.mu.Lock()
	before, existed := c.snap.Node(n.Name)
	c.snap.UpsertNode(n)
	c.mu.Unlock()
	if existed && !nodeChanged(before, n) {
		return
	}
	c.countNode()
	c.tell(n)
}

func (c *ClusterState) deleteNode(n *corev1.Node) {
	c.mu.Lock()
	c.snap.DeleteNode(n.Name)
	c.mu.Unlock()
	c.countNode()
	c.tell(n)
}

// dropNodesBut deletes the nodes not among keep.
func (c *ClusterState) dropNodesBut(keep map[string]struct{}) {
	var gone []*corev1.Node
	c.mu.Lock()
	for _, name := range c.snap.NodeNames() {
		if _, ok := keep[name]; !ok {
			if n, ok := c.snap.Node(name); ok {
				gone = append(gone, n)
			}
			c.snap.DeleteNode(name)
		}
	}
	c.mu.Unlock()
	for _, n := range gone {
		c.countNode()
		c.tell(n)
	}
}
