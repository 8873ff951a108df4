package clusterstate

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/placement-guard/placement-guard/internal/pacing"
	"github.com/placement-guard/placement-guard/internal/podwire"
)

// NewNodeFeed returns the feed of every node of the cluster into state,
// paced as the pod feed (NewPodFeed). Nodes are decoded by podwire, which
// skips on the wire their managed fields, addresses and versions
// (podwire.TrimNode), and their images' names are kept once for all nodes
// (imageNames).
//
// Every node sends a status heartbeat every few dozen seconds, and a
// thousand nodes several a second, none of which changes an answer: taken
// straight into the snapshot, with nothing told unless what the engine
// reads changed (nodeChanged), a heartbeat costs reading its wire form
// (podwire gives back the node before it, with its new version) and a
// comparison, where an informer would hand it through a queue and two
// goroutines to its handler.
func NewNodeFeed(cfg *rest.Config, state *ClusterState, readEvery time.Duration) (*Feed, error) {
	lw, pacer, err := coreListWatch(cfg, "nodes", readEvery)
	if err != nil {
		return nil, err
	}
	return newNodeFeed(lw, state, pacer), nil
}

func newNodeFeed(lw toolscache.ListerWatcher, state *ClusterState, pacer *pacing.Pacer) *Feed {
	f := newFeed("node", lw, pacer)
	return &Feed{feed: f, object: &corev1.Node{}, store: &store{feed: f, records: nodeRecords{state}}}
}

// nodeRecords are the cluster state's nodes.
type nodeRecords struct{ state *ClusterState }

func (r nodeRecords) upsert(obj any, _ watch.EventType) { r.state.upsertNode(obj) }

func (r nodeRecords) remove(obj any) {
	if n, ok := obj.(*corev1.Node); ok {
		r.state.deleteNode(n)
	}
}

func (nodeRecords) key(obj any) (string, bool) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return "", false
	}
	return n.Name, true
}

func (r nodeRecords) dropAllBut(keep map[string]struct{}) { r.state.dropNodesBut(keep) }

func (nodeRecords) listed(bool) {}

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
	c.imageNames.internImages(n)
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
	podwire.ForgetNode(n.Name)
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
			podwire.ForgetNode(name)
			c.snap.DeleteNode(name)
		}
	}
	c.mu.Unlock()
	for _, n := range gone {
		c.countNode()
		c.tell(n)
	}
}

// imageNames keeps one copy of each image name the nodes report: the
// nodes of a pool report the same images, and every heartbeat decodes
// them anew. It is emptied when it grows past maxImageNames, so that the
// names of images long gone do not stay.
type imageNames map[string]string

const maxImageNames = 1 << 15

// internImages points n's image names at the kept copies.
func (in *imageNames) internImages(n *corev1.Node) {
	if len(n.Status.Images) == 0 {
		return
	}
	if *in == nil || len(*in) > maxImageNames {
		*in = imageNames{}
	}
	for i := range n.Status.Images {
		names := n.Status.Images[i].Names
		for k, name := range names {
			if kept, ok := (*in)[name]; ok {
				names[k] = kept
				continue
			}
			(*in)[name] = name
		}
	}
}
