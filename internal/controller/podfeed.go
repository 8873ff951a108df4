package controller

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/placement-guard/placement-guard/internal/metrics"
	"github.com/placement-guard/placement-guard/internal/pacing"
	"github.com/placement-guard/placement-guard/internal/podwire"
)

// DefaultPodReadInterval is zero: pod events are read as they arrive.
// Paced reads (100ms, say) cut the operator's CPU under churn by more than
// half (docs/performance.md), but a migration reconciled within the
// interval after its pods changed judges them as they were: one created
// right after its Deployment may not see all its pods yet.
const DefaultPodReadInterval time.Duration = 0

// PacedPodReadInterval is the pace measured in docs/performance.md.
const PacedPodReadInterval = 100 * time.Millisecond

// PodFeed keeps the engine's pods in step with the API server. It runs a
// reflector of its own whose store is the engine's snapshot: each pod
// decoded from the watch goes straight into the engine's compact record
// and is dropped, so the operator holds one small copy of each pod and no
// informer cache holds a second, full one. The controller reads target
// and protected pods from the same records (PodsControlledBy,
// PodsSelected).
type PodFeed struct {
	state  *ClusterState
	lw     toolscache.ListerWatcher
	synced chan struct{}
	// pacer paces the feed's connection between lists; nil when unpaced.
	pacer *pacing.Pacer
}

var _ manager.LeaderElectionRunnable = (*PodFeed)(nil)

// NewPodFeed returns the feed of every pod of the cluster into state,
// listed and watched with cfg in protobuf, the cheapest form to decode,
// and uncompressed: a list of every pod is large, and compressing it costs
// both ends more CPU than the cluster's network saves. Pods are decoded by
// podwire, which skips on the wire what the engine never reads
// (environment, probes, images, managedFields, most of the status): most
// of a pod's bytes, and most of what decoding it would allocate.
//
// The watch body is read in bulk (pacing.Streams). With readEvery above
// zero the feed's connection is read at most once
// every readEvery while pod events trickle in (package pacing): under
// churn, waking for each event costs more than decoding it. Pod events
// then reach the engine up to readEvery late. Lists are never paced.
func NewPodFeed(cfg *rest.Config, state *ClusterState, readEvery time.Duration) (*PodFeed, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.DisableCompression = true
	var pacer *pacing.Pacer
	if readEvery > 0 {
		// A connection of its own (client-go caches no transport with a
		// custom dialer), so that the pacing delays pod events only.
		pacer = pacing.NewPacer(readEvery)
		cfg.Dial = pacer.Dial
	}
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cfg.APIPath = "/api"
	cfg.GroupVersion = &corev1.SchemeGroupVersion
	cfg.NegotiatedSerializer = pacing.Streams{NegotiatedSerializer: podwire.Serializer{NegotiatedSerializer: clientgoscheme.Codecs.WithoutConversion()}}
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("client for the pod feed: %w", err)
	}
	return newPodFeed(toolscache.NewListWatchFromClient(rc, "pods", corev1.NamespaceAll, fields.Everything()), state, pacer), nil
}

// newPodFeed feeds state from lw; with a pacer, its lists pause the pacing.
func newPodFeed(lw toolscache.ListerWatcher, state *ClusterState, pacer *pacing.Pacer) *PodFeed {
	if pacer != nil {
		lw = listingPauses{lw: toolscache.ToListerWatcherWithContext(lw), pacer: pacer}
	}
	return &PodFeed{state: state, lw: lw, synced: make(chan struct{}), pacer: pacer}
}

// Start lists and watches pods until ctx ends.
func (f *PodFeed) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("pod-feed")
	r := toolscache.NewReflectorWithOptions(f.lw, &corev1.Pod{}, &podStore{feed: f}, toolscache.ReflectorOptions{
		Name: "placement-guard pods", Logger: &log,
	})
	r.RunWithContext(ctx)
	return nil
}

// NeedLeaderElection is false: every replica keeps its engine warm, so a
// new leader answers at once.
func (f *PodFeed) NeedLeaderElection() bool { return false }

// WaitForSync blocks until the engine holds every pod of the first list.
func (f *PodFeed) WaitForSync(ctx context.Context) error {
	if f.HasSynced() {
		return nil
	}
	select {
	case <-f.synced:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for the pod feed to list every pod: %w", ctx.Err())
	}
}

// HasSynced reports whether the first list has been taken in.
func (f *PodFeed) HasSynced() bool {
	select {
	case <-f.synced:
		return true
	default:
		return false
	}
}

// podStore is the reflector's store: it hands each pod to the snapshot.
// The reflector calls it from one goroutine.
type podStore struct {
	feed   *PodFeed
	listed bool
}

var _ toolscache.TransformingStore = (*podStore)(nil)

// Transformer takes each pod of a streamed list in as it arrives and
// hands the reflector a stand-in to hold instead: the reflector holds
// every object of a streamed list until the list ends, and 150,000 pods,
// even stripped, would hold several times the records' memory at once.
// The stand-in keeps the pod's name, for the reflector's keys, and its
// uid, for Replace. Taking pods in before the list ends is safe: each is
// the pod as it is now, and a pod deleted meanwhile is dropped by Replace
// as missing from the list.
func (p *podStore) Transformer() toolscache.TransformFunc {
	return func(o any) (any, error) {
		pod, ok := o.(*corev1.Pod)
		if !ok {
			return o, nil
		}
		p.feed.state.upsertPod(pod)
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}}, nil
	}
}

func (p *podStore) Add(obj any) error {
	metrics.CountPodAdded()
	p.feed.state.upsertPod(obj)
	return nil
}

func (p *podStore) Update(obj any) error {
	metrics.CountPodModified()
	p.feed.state.upsertPod(obj)
	return nil
}

func (p *podStore) Resync() error { return nil }

func (p *podStore) Delete(obj any) error {
	metrics.CountPodDeleted()
	if pod, ok := obj.(*corev1.Pod); ok {
		p.feed.state.deletePod(pod)
	}
	return nil
}

// Replace takes in a full list: every pod listed, and the deletion of
// every pod the engine holds that the list lacks (deleted while the watch
// was down).
func (p *podStore) Replace(list []any, _ string) error {
	listed := make(map[types.UID]struct{}, len(list))
	for _, obj := range list {
		switch o := obj.(type) {
		case *corev1.Pod:
			listed[o.UID] = struct{}{}
			p.feed.state.upsertPod(o)
		case *metav1.PartialObjectMetadata:
			// Taken in as the list streamed (Transformer).
			listed[o.UID] = struct{}{}
		}
	}
	p.feed.state.dropPodsBut(listed)
	// The list is in: the watch's events trickle in from here on.
	p.feed.pacer.Resume()
	if !p.listed {
		p.listed = true
		close(p.feed.synced)
		// Listing every pod of a large cluster briefly takes several times
		// what the records keep; give it back now rather than over minutes.
		debug.FreeOSMemory()
	}
	return nil
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

// dropPodsBut deletes the pods not among keep.
func (c *ClusterState) dropPodsBut(keep map[types.UID]struct{}) {
	var gone []*corev1.Pod
	c.mu.Lock()
	for _, uid := range c.snap.PodUIDs() {
		if _, ok := keep[uid]; !ok {
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
