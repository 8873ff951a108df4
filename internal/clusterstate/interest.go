package clusterstate

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// Interest is what a change in its namespace must touch to concern one
// migration. A migration at work (waiting for capacity, rolling out,
// soaking) is told of every change in its namespace, as its next step may
// hang on any pod there; a settled one only of changes to its workloads,
// to the pods its targets, its constraint or its guards select, so pod
// churn elsewhere in the namespace costs it nothing.
type Interest struct {
	Settled bool
	// Workloads are the targets; Selector, when the spec selects its
	// targets by label, selects the workloads it may add.
	Workloads map[pgv1.TargetRef]bool
	Selector  labels.Selector
	// Pods select the pods whose change can change a verdict: the
	// targets', those the constraint counts and the protected ones.
	Pods []labels.Selector
}

// AtWork is the interest of a migration that is not settled, or not yet
// known: every change in its namespace.
var AtWork = &Interest{}

func (in *Interest) concernsPod(podLabels ...labels.Set) bool {
	if !in.Settled {
		return true
	}
	for _, set := range podLabels {
		if set == nil {
			continue
		}
		for _, sel := range in.Pods {
			if sel.Matches(set) {
				return true
			}
		}
	}
	return false
}

func (in *Interest) concernsWorkload(ref pgv1.TargetRef, workloadLabels labels.Set) bool {
	if !in.Settled || in.Workloads[ref] {
		return true
	}
	return in.Selector != nil && workloadLabels != nil && in.Selector.Matches(workloadLabels)
}

// Router holds the interest of every migration seen, by namespace and
// name: the map from a change to the migrations it can affect. It paces
// the feeds by it: while any migration is at work they read events as
// they arrive.
type Router struct {
	mu    sync.RWMutex
	byNS  map[string]map[string]*Interest
	feeds Feeds
}

// NewRouter routes changes and paces feeds. A zero Router routes and
// paces none until Pace.
func NewRouter(feeds Feeds) *Router { return &Router{feeds: feeds} }

// Pace makes the router pace feeds.
func (r *Router) Pace(feeds Feeds) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.feeds = feeds
	r.pace()
}

// Set records a migration's interest; nil means it is at work.
func (r *Router) Set(key types.NamespacedName, in *Interest) {
	if in == nil {
		in = AtWork
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byNS == nil {
		r.byNS = map[string]map[string]*Interest{}
	}
	if r.byNS[key.Namespace] == nil {
		r.byNS[key.Namespace] = map[string]*Interest{}
	}
	r.byNS[key.Namespace][key.Name] = in
	r.pace()
}

// MarkAtWork records that a migration is being looked at: until its
// reconcile records what it read, every change in its namespace concerns
// it, so that no change made while it reads is lost. A migration already
// known keeps its interest: its reconcile requeues it for any change the
// interest admits.
func (r *Router) MarkAtWork(key types.NamespacedName) {
	r.mu.RLock()
	_, known := r.byNS[key.Namespace][key.Name]
	r.mu.RUnlock()
	if !known {
		r.Set(key, AtWork)
	}
}

// Settled reports whether a migration is known to have settled.
func (r *Router) Settled(key types.NamespacedName) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	in, ok := r.byNS[key.Namespace][key.Name]
	return ok && in.Settled
}

// Forget drops a deleted migration.
func (r *Router) Forget(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.byNS[key.Namespace], key.Name)
	if len(r.byNS[key.Namespace]) == 0 {
		delete(r.byNS, key.Namespace)
	}
	r.pace()
}

// GoingToWork records a migration going to work (new, its spec changed,
// being deleted), which hurries the feeds for as long as any is at work,
// and says how long it waits, once, for the events they held back: a
// migration created right after its Deployment would otherwise be judged
// on pods missing.
func (r *Router) GoingToWork(key types.NamespacedName) time.Duration {
	if r.Settled(key) {
		r.Set(key, AtWork)
	}
	return r.feeds.FreshIn()
}

// pace keeps the feeds up with events while any migration is at work;
// r.mu is held, so that the calls are in the order of the changes.
func (r *Router) pace() {
	for _, byName := range r.byNS {
		for _, in := range byName {
			if !in.Settled {
				r.feeds.KeepUp(true)
				return
			}
		}
	}
	r.feeds.KeepUp(false)
}

// concerned lists the migrations of namespace whose interest admits the
// change.
func (r *Router) concerned(namespace string, admits func(*Interest) bool) []types.NamespacedName {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []types.NamespacedName
	for name, in := range r.byNS[namespace] {
		if admits(in) {
			out = append(out, types.NamespacedName{Namespace: namespace, Name: name})
		}
	}
	return out
}

// PodChange lists the migrations a change of a pod concerns, from its
// labels before and after (either nil for a creation or a deletion).
func (r *Router) PodChange(namespace string, before, after map[string]string) []types.NamespacedName {
	return r.concerned(namespace, func(in *Interest) bool {
		return in.concernsPod(labelSet(before), labelSet(after))
	})
}

// WorkloadChange lists the migrations a change of a workload concerns.
func (r *Router) WorkloadChange(namespace string, ref pgv1.TargetRef, workloadLabels map[string]string) []types.NamespacedName {
	return r.concerned(namespace, func(in *Interest) bool {
		return in.concernsWorkload(ref, labelSet(workloadLabels))
	})
}

func labelSet(m map[string]string) labels.Set {
	if m == nil {
		return nil
	}
	return labels.Set(m)
}
