package clusterstate

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/placement-guard/placement-guard/internal/pacing"
	"github.com/placement-guard/placement-guard/internal/podwire"
)

// feed is what the pod and node feeds share: a reflector of their own
// whose store is the engine's snapshot, so that no informer cache holds a
// second copy of what the engine keeps; a connection of their own, paced
// between lists; and the end of their first list.
type feed struct {
	kind   string
	lw     toolscache.ListerWatcher
	synced chan struct{}
	once   sync.Once
	// pacer paces the feed's connection between lists; nil when unpaced.
	pacer *pacing.Pacer
}

// newFeed feeds kind (pods, nodes) from lw; with a pacer, its lists pause
// the pacing, and the store resumes it (listedAll).
func newFeed(kind string, lw toolscache.ListerWatcher, pacer *pacing.Pacer) *feed {
	if pacer != nil {
		lw = listingPauses{lw: toolscache.ToListerWatcherWithContext(lw), pacer: pacer}
	}
	return &feed{kind: kind, lw: lw, synced: make(chan struct{}), pacer: pacer}
}

// feedConfig is cfg for a feed's client: protobuf, the cheapest form to
// decode, uncompressed (a list of every object is large, and compressing
// it costs both ends more CPU than the cluster's network saves), over
// HTTP/1.1, on a connection of its own paced at readEvery (none when zero).
//
// HTTP/1.1: a feed makes one request at a time, and over HTTP/1.1 the
// watch's own goroutine reads its body from the connection, where HTTP/2
// hands every event over from a read loop and writes a flow-control
// window back for every few KiB read. The watch body is read in bulk
// (pacing.Streams).
func feedConfig(cfg *rest.Config, readEvery time.Duration, codecs runtime.NegotiatedSerializer) (*rest.Config, *pacing.Pacer) {
	cfg = rest.CopyConfig(cfg)
	cfg.DisableCompression = true
	var pacer *pacing.Pacer
	if readEvery > 0 {
		// A connection of its own (client-go caches no transport with a
		// custom dialer), so that the pacing delays this feed only.
		pacer = pacing.NewPacer(readEvery)
		cfg.Dial = pacer.Dial
	}
	cfg.NextProtos = []string{"http/1.1"}
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cfg.NegotiatedSerializer = pacing.Streams{NegotiatedSerializer: codecs}
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return cfg, pacer
}

// coreListWatch lists and watches every object of a core resource (pods,
// nodes) across namespaces over a client of its own (feedConfig), decoded
// by podwire, which skips on the wire what the engine never reads.
func coreListWatch(cfg *rest.Config, resource string, readEvery time.Duration) (toolscache.ListerWatcher, *pacing.Pacer, error) {
	cfg, pacer := feedConfig(cfg, readEvery, podwire.Serializer{NegotiatedSerializer: clientgoscheme.Codecs.WithoutConversion()})
	cfg.APIPath = "/api"
	cfg.GroupVersion = &corev1.SchemeGroupVersion
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("client for the %s feed: %w", resource, err)
	}
	return toolscache.NewListWatchFromClient(rc, resource, corev1.NamespaceAll, fields.Everything()), pacer, nil
}

// Feed keeps one kind of the engine's objects, pods or nodes, in step with
// the API server: a reflector whose store is the engine's snapshot, over a
// connection of its own (feed).
type Feed struct {
	*feed
	// object is the kind's empty object, as the reflector expects it.
	object runtime.Object
	// store hands what the reflector reads to the kind's records.
	store toolscache.ReflectorStore
}

var _ manager.LeaderElectionRunnable = (*Feed)(nil)

// Start lists and watches the kind until ctx ends.
func (f *Feed) Start(ctx context.Context) error {
	f.run(ctx, f.object, f.store)
	return nil
}

// records are one kind's records in the cluster state, as a feed's store
// hands it the objects the reflector reads, from one goroutine.
type records interface {
	// upsert takes an object in; event is the watch event's type, or ""
	// for an object of a list.
	upsert(obj any, event watch.EventType)
	remove(obj any)
	// key names an object of a list, for the deletion of those the list
	// lacks; false for an object the kind does not hold.
	key(obj any) (string, bool)
	// dropAllBut deletes every record keep does not name.
	dropAllBut(keep map[string]struct{})
	// listed is told that a list is in, and whether it was the first.
	listed(first bool)
}

// store is a feed's reflector store: the records of its kind.
type store struct {
	feed    *feed
	records records
}

func (s *store) Add(obj any) error {
	s.records.upsert(obj, watch.Added)
	return nil
}

func (s *store) Update(obj any) error {
	s.records.upsert(obj, watch.Modified)
	return nil
}

func (s *store) Delete(obj any) error {
	s.records.remove(obj)
	return nil
}

// Replace takes in a full list: every object listed, and the deletion of
// every record the list lacks (deleted while the watch was down).
func (s *store) Replace(list []any, _ string) error {
	listed := make(map[string]struct{}, len(list))
	for _, obj := range list {
		if key, ok := s.records.key(obj); ok {
			listed[key] = struct{}{}
			s.records.upsert(obj, "")
		}
	}
	s.records.dropAllBut(listed)
	s.records.listed(s.feed.listedAll())
	return nil
}

func (s *store) Resync() error { return nil }

// run lists and watches into store until ctx ends.
func (f *feed) run(ctx context.Context, expected runtime.Object, store toolscache.ReflectorStore) {
	log := logf.FromContext(ctx).WithName(f.kind + "-feed")
	r := toolscache.NewReflectorWithOptions(f.lw, expected, store, toolscache.ReflectorOptions{
		Name: "placement-guard " + f.kind, Logger: &log,
	})
	r.RunWithContext(ctx)
}

// listedAll is called by the store once a list is in: the watch's events
// trickle in from here on. It reports whether that was the first list.
func (f *feed) listedAll() (first bool) {
	f.pacer.Resume()
	f.once.Do(func() {
		first = true
		close(f.synced)
	})
	return first
}

// NeedLeaderElection is false: every replica keeps its engine warm, so a
// new leader answers at once.
func (f *feed) NeedLeaderElection() bool { return false }

// WaitForSync blocks until the engine holds everything of the first list.
func (f *feed) WaitForSync(ctx context.Context) error {
	if f.HasSynced() {
		return nil
	}
	select {
	case <-f.synced:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for the %s feed to list every object: %w", f.kind, ctx.Err())
	}
}

// HasSynced reports whether the first list has been taken in.
func (f *feed) HasSynced() bool {
	select {
	case <-f.synced:
		return true
	default:
		return false
	}
}

// Feeds are the engine's feeds, paced together: while a migration is at
// work every one reads events as they arrive.
type Feeds []*feed

// NewFeeds paces the pod and node feeds together.
func NewFeeds(pods, nodes *Feed) Feeds { return Feeds{pods.feed, nodes.feed} }

// KeepUp reads events as they arrive while a migration is at work, and at
// the feeds' pace otherwise.
func (fs Feeds) KeepUp(atWork bool) {
	for _, f := range fs {
		if atWork {
			f.pacer.Hurry()
		} else {
			f.pacer.Relax()
		}
	}
}

// FreshIn is how long until the engine is as current as unpaced feeds
// keep it, hurrying the feeds that are not yet: zero for unpaced feeds or
// ones hurried for an interval, whose connections then hold no event that
// waited out their pace.
func (fs Feeds) FreshIn() time.Duration {
	var wait time.Duration
	for _, f := range fs {
		if f.pacer == nil {
			continue
		}
		f.pacer.Hurry()
		wait = max(wait, f.pacer.Every()-f.pacer.HurriedFor())
	}
	return wait
}

// HasSynced reports whether every feed has taken in its first list:
// until then the snapshot does not know the cluster.
func (fs Feeds) HasSynced() bool {
	for _, f := range fs {
		if f == nil || !f.HasSynced() {
			return false
		}
	}
	return len(fs) > 0
}

// WaitForSync blocks until every feed holds its first list.
func (fs Feeds) WaitForSync(ctx context.Context) error {
	for _, f := range fs {
		if err := f.WaitForSync(ctx); err != nil {
			return err
		}
	}
	return nil
}
