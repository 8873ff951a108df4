package clusterstate

import (
	"runtime/debug"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/placement-guard/placement-guard/internal/metrics"
	"github.com/placement-guard/placement-guard/internal/pacing"
)

// DefaultFeedReadInterval is the pace of the pod and node feeds: while
// every migration is settled, their events are read at most this often,
// every event of the interval at one wake-up, for less than half the CPU
// that reading each as it arrives costs under pod churn and node
// heartbeats (docs/performance.md). While a migration is at work they are
// read as they arrive (Router.GoingToWork).
const DefaultFeedReadInterval = 100 * time.Millisecond

// NewPodFeed returns the feed of every pod of the cluster into state
// (feedConfig). Its reflector's store is the engine's snapshot: each pod
// decoded from the watch goes straight into the engine's compact record and
// is dropped, so the operator holds one small copy of each pod; the
// controller reads target and protected pods from the same records
// (PodsControlledBy, PodsSelected). Pods are decoded by podwire, which
// skips on the wire what the engine never reads (environment, probes,
// images, managedFields, most of the status): most of a pod's bytes, and
// most of what decoding it would allocate.
//
// With readEvery above zero the feed's connection is read at most once
// every readEvery while pod events trickle in (package pacing): under
// churn, waking for each event costs more than decoding it. Pod events
// then reach the engine up to readEvery late, except while the feed is
// hurried (Feeds.KeepUp, Feeds.FreshIn) or lists: lists are never paced.
func NewPodFeed(cfg *rest.Config, state *ClusterState, readEvery time.Duration) (*Feed, error) {
	lw, pacer, err := coreListWatch(cfg, "pods", readEvery)
	if err != nil {
		return nil, err
	}
	return newPodFeed(lw, state, pacer), nil
}

// newPodFeed feeds state from lw; with a pacer, its lists pause the pacing.
func newPodFeed(lw toolscache.ListerWatcher, state *ClusterState, pacer *pacing.Pacer) *Feed {
	f := newFeed("pod", lw, pacer)
	return &Feed{feed: f, object: &corev1.Pod{}, store: &podStore{store{feed: f, records: podRecords{state}}}}
}

// podStore is the pod feed's store, which takes a streamed list's pods in
// as they arrive (Transformer).
type podStore struct{ store }

var _ toolscache.TransformingStore = (*podStore)(nil)

// Transformer takes each pod of a streamed list in as it arrives and
// hands the reflector a stand-in to hold instead: the reflector holds
// every object of a streamed list until the list ends, and 150,000 pods,
// even stripped, would hold several times the records' memory at once.
// The stand-in is the pod's uid alone, for Replace: the reflector keys
// what it holds by the object before the transformer, and reads nothing
// else of it. Taking pods in before the list ends is safe: each is the
// pod as it is now, and a pod deleted meanwhile is dropped by Replace as
// missing from the list.
func (p *podStore) Transformer() toolscache.TransformFunc {
	state := p.records.(podRecords).state
	return func(o any) (any, error) {
		pod, ok := o.(*corev1.Pod)
		if !ok {
			return o, nil
		}
		state.upsertPod(pod)
		return streamedPod(pod.UID), nil
	}
}

// streamedPod stands, in the reflector's store, for a pod of a streamed
// list already taken in: its uid.
type streamedPod types.UID

// podRecords are the cluster state's pods, by uid.
type podRecords struct{ state *ClusterState }

func (r podRecords) upsert(obj any, event watch.EventType) {
	switch event {
	case watch.Added:
		metrics.CountPodAdded()
	case watch.Modified:
		metrics.CountPodModified()
	}
	// A stand-in of a streamed list was taken in as it streamed.
	r.state.upsertPod(obj)
}

func (r podRecords) remove(obj any) {
	metrics.CountPodDeleted()
	if pod, ok := obj.(*corev1.Pod); ok {
		r.state.deletePod(pod)
	}
}

func (podRecords) key(obj any) (string, bool) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return string(o.UID), true
	case streamedPod:
		return string(o), true
	}
	return "", false
}

func (r podRecords) dropAllBut(keep map[string]struct{}) { r.state.dropPodsBut(keep) }

// listed gives back, after the first list, what listing every pod of a
// large cluster briefly took: several times what the records keep, given
// back now rather than over minutes.
func (podRecords) listed(first bool) {
	if first {
		debug.FreeOSMemory()
	}
}

// upsertPod takes a pod in and tells who listens, with the labels it had.
func (c *ClusterState) upsertPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	c.mu.Lock()
	before, existed := c.snap.PodLabels(pod.UID)
	err := c.snap.UpsertPod(pod)
	c.mu.Unlock()
	if err != nil {
		// A pod whose selectors do not parse cannot be judged; the API
		// server normally refuses such pods.
		logf.Log.WithName("cluster-state").Error(err, "Skipping a pod the placement engine cannot index", "pod", pod.Namespace+"/"+pod.Name)
	}
	if !existed {
		before = nil
	}
	c.tellPod(pod.Namespace, before, pod.Labels)
}

func (c *ClusterState) deletePod(pod *corev1.Pod) {
	c.mu.Lock()
	c.snap.DeletePod(pod.UID)
	c.mu.Unlock()
	c.tellPod(pod.Namespace, nil, pod.Labels)
}

// dropPodsBut deletes the pods whose uid keep lacks.
func (c *ClusterState) dropPodsBut(keep map[string]struct{}) {
	var gone []*corev1.Pod
	c.mu.Lock()
	for _, uid := range c.snap.PodUIDs() {
		if _, ok := keep[string(uid)]; !ok {
			if p, ok := c.snap.Pod(uid); ok {
				gone = append(gone, p)
			}
			c.snap.DeletePod(uid)
		}
	}
	c.mu.Unlock()
	for _, p := range gone {
		c.tellPod(p.Namespace, nil, p.Labels)
	}
}

// PodsControlledBy are the live pods whose controller has one of uids, in
// namespace, by name. The pods are rebuilt for the caller from the
// engine's records; their shared parts must not be changed.
func (c *ClusterState) PodsControlledBy(namespace string, uids ...types.UID) []*corev1.Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*corev1.Pod
	for _, uid := range uids {
		out = append(out, c.snap.PodsControlledBy(namespace, uid)...)
	}
	return out
}

// PodsSelected are the live pods of namespace sel selects, by name.
func (c *ClusterState) PodsSelected(namespace string, sel labels.Selector) []*corev1.Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snap.PodsSelected(namespace, sel)
}
