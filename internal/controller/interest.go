package controller

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// interest is what a change in its namespace must touch to concern one
// migration. A migration at work (waiting for capacity, rolling out,
// soaking) is told of every change in its namespace, as its next step may
// hang on any pod there; a settled one only of changes to its workloads,
// to the pods its targets, its constraint or its guards select, so pod
// churn elsewhere in the namespace costs it nothing.
type interest struct {
	settled bool
	// workloads are the targets by "Kind/name"; selector, when the spec
	// selects its targets by label, selects the workloads it may add.
	workloads map[string]bool
	selector  labels.Selector
	// pods select the pods whose change can change a verdict: the
	// targets', those the constraint counts and the protected ones.
	pods []labels.Selector
}

// atWork is the interest of a migration that is not settled, or not yet
// known: every change in its namespace.
var atWork = &interest{}

func (in *interest) concernsPod(podLabels ...labels.Set) bool {
	if !in.settled {
		return true
	}
	for _, set := range podLabels {
		if set == nil {
			continue
		}
		for _, sel := range in.pods {
			if sel.Matches(set) {
				return true
			}
		}
	}
	return false
}

func (in *interest) concernsWorkload(kind, name string, workloadLabels labels.Set) bool {
	if !in.settled || in.workloads[kind+"/"+name] {
		return true
	}
	return in.selector != nil && workloadLabels != nil && in.selector.Matches(workloadLabels)
}

// interests holds the interest of every migration the reconciler has
// seen, by namespace and name: the map from a change to the migrations
// it can affect.
type interests struct {
	mu   sync.RWMutex
	byNS map[string]map[string]*interest
	// onAtWork, when set, is told after every change whether any migration
	// is at work, under the lock, so that its calls are in the order of
	// the changes (the pod feed reads events as they come while one is).
	onAtWork func(bool)
}

// set records a migration's interest; a nil interest means it is at work.
func (i *interests) set(key types.NamespacedName, in *interest) {
	if in == nil {
		in = atWork
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.byNS == nil {
		i.byNS = map[string]map[string]*interest{}
	}
	if i.byNS[key.Namespace] == nil {
		i.byNS[key.Namespace] = map[string]*interest{}
	}
	i.byNS[key.Namespace][key.Name] = in
	i.told()
}

// markAtWork records that a migration is being looked at: until its
// reconcile records what it read, every change in its namespace concerns
// it, so that no change made while it reads is lost. A migration already
// known keeps its interest: its reconcile requeues it for any change the
// interest admits.
func (i *interests) markAtWork(key types.NamespacedName) {
	i.mu.RLock()
	_, known := i.byNS[key.Namespace][key.Name]
	i.mu.RUnlock()
	if !known {
		i.set(key, atWork)
	}
}

// settled reports whether a migration is known to have settled.
func (i *interests) settled(key types.NamespacedName) bool {
	i.mu.RLock()
	defer i.mu.RUnlock()
	in, ok := i.byNS[key.Namespace][key.Name]
	return ok && in.settled
}

func (i *interests) forget(key types.NamespacedName) {
	i.mu.Lock()
	defer i.mu.Unlock()
	delete(i.byNS[key.Namespace], key.Name)
	if len(i.byNS[key.Namespace]) == 0 {
		delete(i.byNS, key.Namespace)
	}
	i.told()
}

// told tells onAtWork whether any migration is at work; i.mu is held.
func (i *interests) told() {
	if i.onAtWork == nil {
		return
	}
	for _, byName := range i.byNS {
		for _, in := range byName {
			if !in.settled {
				i.onAtWork(true)
				return
			}
		}
	}
	i.onAtWork(false)
}

// concerned lists the migrations of namespace whose interest admits the
// change.
func (i *interests) concerned(namespace string, admits func(*interest) bool) []reconcile.Request {
	i.mu.RLock()
	defer i.mu.RUnlock()
	var out []reconcile.Request
	for name, in := range i.byNS[namespace] {
		if admits(in) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}})
		}
	}
	return out
}

// podChange lists the migrations a change of a pod concerns, from its
// labels before and after (either nil for a creation or a deletion).
func (i *interests) podChange(namespace string, before, after map[string]string) []reconcile.Request {
	return i.concerned(namespace, func(in *interest) bool {
		return in.concernsPod(labelSet(before), labelSet(after))
	})
}

// workloadChange lists the migrations a change of a workload concerns.
func (i *interests) workloadChange(namespace, kind, name string, workloadLabels map[string]string) []reconcile.Request {
	return i.concerned(namespace, func(in *interest) bool {
		return in.concernsWorkload(kind, name, labelSet(workloadLabels))
	})
}

func labelSet(m map[string]string) labels.Set {
	if m == nil {
		return nil
	}
	return labels.Set(m)
}

// interestOf is what the migration read this reconcile depends on once
// it has settled. A selector that does not parse cannot narrow anything:
// the migration is then told of every change, as one at work is.
func (s *scope) interestOf() *interest {
	if !settled(s.pm) {
		return atWork
	}
	in := &interest{settled: true, workloads: map[string]bool{}}
	for _, ref := range s.pm.Spec.Targets {
		in.workloads[string(ref.Kind)+"/"+ref.Name] = true
	}
	if ts := s.pm.Spec.TargetSelector; ts != nil {
		sel, err := metav1.LabelSelectorAsSelector(ts.Selector.AsMeta())
		if err != nil {
			return atWork
		}
		in.selector = sel
	}
	selectors := []*metav1.LabelSelector{}
	for _, t := range s.targets {
		in.workloads[string(t.Ref.Kind)+"/"+t.Ref.Name] = true
		selectors = append(selectors, t.Selector())
	}
	if a := s.constraint.AntiAffinity; a != nil && a.Selector != nil {
		selectors = append(selectors, a.Selector)
	}
	if sp := s.constraint.Spread; sp != nil && sp.Selector != nil {
		selectors = append(selectors, sp.Selector)
	}
	if p := s.pm.Spec.Protected(); p != nil {
		selectors = append(selectors, p.AsMeta())
	}
	for _, ls := range selectors {
		if ls == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil {
			return atWork
		}
		in.pods = append(in.pods, sel)
	}
	return in
}
