package clusterstate

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/targets"
)

// ClusterState keeps the placement engine's snapshot in step with the
// manager's informers: each pod, node, namespace, claim, volume or storage
// class event updates the snapshot's indexes in place, so a question never
// re-reads or re-indexes the cluster.
type ClusterState struct {
	mu   snapshotLock
	snap *placement.Snapshot
	// imageNames are the nodes' image names, kept once (under mu).
	imageNames imageNames
	// nodeChanges counts the node events that can change an answer: what
	// a verdict that depends on every node keys on.
	nodeChanges atomic.Uint64

	// changed is told, after the snapshot has taken in an event, the
	// object changed, so that the migrations it may concern are
	// reconciled against a snapshot that already holds it.
	notifyMu   sync.RWMutex
	changed    func(obj client.Object)
	podChanged func(namespace string, before, after map[string]string)
}

// NotifyPods registers the function told about every pod the snapshot
// takes in: its namespace and its labels before (nil for a creation or a
// deletion) and after (the last known for a deletion).
func (c *ClusterState) NotifyPods(f func(namespace string, before, after map[string]string)) {
	c.notifyMu.Lock()
	defer c.notifyMu.Unlock()
	c.podChanged = f
}

func (c *ClusterState) tellPod(namespace string, before, after map[string]string) {
	c.notifyMu.RLock()
	f := c.podChanged
	c.notifyMu.RUnlock()
	if f != nil {
		f(namespace, before, after)
	}
}

// Notify registers the function told about every change the snapshot
// takes in but a pod's: the object as it is now (the last state known
// for a deletion).
func (c *ClusterState) Notify(f func(obj client.Object)) {
	c.notifyMu.Lock()
	defer c.notifyMu.Unlock()
	c.changed = f
}

func (c *ClusterState) tell(o any) {
	c.notifyMu.RLock()
	f := c.changed
	c.notifyMu.RUnlock()
	if obj, ok := o.(client.Object); ok && f != nil {
		f(obj)
	}
}

// NewClusterState returns an empty cluster state; Watch fills it. Its
// rollouts leave their steps' tied nodes unnamed: nothing the manager
// says reads them.
func NewClusterState() *ClusterState {
	snap, _ := placement.NewSnapshot(placement.Objects{})
	snap.OmitTies()
	return &ClusterState{mu: newSnapshotLock(), snap: snap}
}

// UseProfiles makes the engine predict with the scheduler profiles ps
// (schedulerprofile.Load), each pod with the one it names.
func (c *ClusterState) UseProfiles(ps *placement.Profiles) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.snap.SetProfiles(ps)
}

// With runs f with the snapshot, holding it still: events wait until f
// returns. f must not keep the snapshot. The questions f asks stop when
// ctx ends, and so does the wait for the snapshot: With then returns an
// error wrapping placement.ErrInterrupted, and nothing f started runs on
// after it returns.
func (c *ClusterState) With(ctx context.Context, f func(*placement.Snapshot) error) error {
	if err := c.mu.LockContext(ctx); err != nil {
		return fmt.Errorf("%w: waiting for the snapshot: %w", placement.ErrInterrupted, err)
	}
	defer c.mu.Unlock()
	return c.snap.Within(ctx, f)
}

// Watch registers the state's event handlers with the informers of the
// cache for every kind the engine reads but pods and nodes, which the pod
// and node feeds bring (Feed).
func (c *ClusterState) Watch(ctx context.Context, ca cache.Cache) error {
	log := logf.FromContext(ctx).WithName("cluster-state")
	for _, k := range placement.ObjectKinds {
		if k.Fed {
			continue
		}
		obj := k.New().(client.Object)
		informer, err := ca.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("watch %s for the placement engine: %w", k.Resource, err)
		}
		upsert := func(o any) {
			c.mu.Lock()
			defer c.mu.Unlock()
			// An object the engine cannot index is skipped and said.
			if err := k.Upsert(c.snap, o.(runtime.Object)); err != nil {
				log.Error(err, "Skipping an object the placement engine cannot index")
			}
		}
		if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(o any) {
				upsert(o)
				c.tell(o)
			},
			UpdateFunc: func(old, o any) {
				upsert(o)
				if relevantChange(old, o) {
					c.tell(o)
				}
			},
			DeleteFunc: func(o any) {
				if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
					o = tomb.Obj
				}
				obj, ok := o.(client.Object)
				if !ok {
					return
				}
				c.mu.Lock()
				k.Delete(c.snap, obj)
				c.mu.Unlock()
				c.tell(o)
			},
		}); err != nil {
			return fmt.Errorf("watch %s for the placement engine: %w", k.Resource, err)
		}
	}
	return nil
}

// countNode counts a node change that can change an answer.
func (c *ClusterState) countNode() { c.nodeChanges.Add(1) }

// NodeChanges counts the node events taken in that can change an answer.
func (c *ClusterState) NodeChanges() uint64 { return c.nodeChanges.Load() }

// relevantChange filters the updates of the informers' kinds worth a
// reconcile: a namespace's matter only when its labels change (a term's
// namespaceSelector reads them; its phase and finalizers reach no answer),
// a Service's, ReplicaSet's, StatefulSet's or ReplicationController's only
// when its selector does.
func relevantChange(old, cur any) bool {
	if a, ok := old.(*corev1.Namespace); ok {
		b, ok := cur.(*corev1.Namespace)
		return !ok || !maps.Equal(a.Labels, b.Labels)
	}
	// A ReplicaSet's status changes many times in a rollout.
	a, okA := old.(runtime.Object)
	b, okB := cur.(runtime.Object)
	if k := placement.KindOfObject(old); okA && okB && k != nil && k.Selector != nil && placement.KindOfObject(cur) == k {
		return !apiequality.Semantic.DeepEqual(k.Selector(a), k.Selector(b))
	}
	return true
}

// nodeChanged reports whether a node's update can change an answer.
// Nodes send a status heartbeat every few dozen seconds; only a change of
// what the engine reads (labels, taints, cordon, allocatable, readiness,
// images) can change an answer. It is typed, not reflective: it runs for every
// heartbeat of every node.
func nodeChanged(a, b *corev1.Node) bool {
	return !maps.Equal(a.Labels, b.Labels) ||
		!slices.EqualFunc(a.Status.Images, b.Status.Images, sameImage) ||
		!slices.EqualFunc(a.Spec.Taints, b.Spec.Taints, sameTaint) ||
		a.Spec.Unschedulable != b.Spec.Unschedulable ||
		!placement.EqualResources(a.Status.Allocatable, b.Status.Allocatable) ||
		nodeReady(a) != nodeReady(b)
}

func sameImage(a, b corev1.ContainerImage) bool {
	return a.SizeBytes == b.SizeBytes && slices.Equal(a.Names, b.Names)
}

func sameTaint(a, b corev1.Taint) bool {
	return a.Key == b.Key && a.Value == b.Value && a.Effect == b.Effect && a.TimeAdded.Equal(b.TimeAdded)
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ClientOptions make the manager's client read pods and nodes from the
// API server: they are not in its cache (CacheOptions), and a read through
// the cache would start an informer holding a full copy of every one.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Pod{}, &corev1.Node{}}}}
}

// CacheOptions trims what the manager caches: managed fields of every
// object, of ReplicaSets the pod template, replaced by its fingerprint
// (targets.TrimReplicaSet), and of Services and ReplicationControllers all
// but their name and selector. Pods and nodes are not in the cache at all:
// The pod and node feeds (Feed) keep them in the engine's records.
func CacheOptions() cache.Options {
	strip := cache.TransformStripManagedFields()
	return cache.Options{
		DefaultTransform: strip,
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.ReplicaSet{}: {Transform: func(o any) (any, error) {
				o, err := strip(o)
				if rs, ok := o.(*appsv1.ReplicaSet); ok && err == nil {
					targets.TrimReplicaSet(rs)
				}
				return o, err
			}},
			// Of Services and ReplicationControllers the engine reads only
			// the selector (the scheduler's default spread).
			&corev1.Service{}: {Transform: func(o any) (any, error) {
				if svc, ok := o.(*corev1.Service); ok {
					return &corev1.Service{ObjectMeta: selectorOwnerMeta(svc.ObjectMeta), Spec: corev1.ServiceSpec{Selector: svc.Spec.Selector}}, nil
				}
				return strip(o)
			}},
			&corev1.ReplicationController{}: {Transform: func(o any) (any, error) {
				if rc, ok := o.(*corev1.ReplicationController); ok {
					return &corev1.ReplicationController{ObjectMeta: selectorOwnerMeta(rc.ObjectMeta), Spec: corev1.ReplicationControllerSpec{Selector: rc.Spec.Selector}}, nil
				}
				return strip(o)
			}},
		},
	}
}

// selectorOwnerMeta is what the cache keeps of the metadata of an object
// read only for its selector: enough to name, update and delete it.
func selectorOwnerMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion}
}
