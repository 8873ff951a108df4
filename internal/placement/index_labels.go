package placement

import (
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// labelIndex finds the pods of a namespace that carry a label, so that a
// selector is answered from its rarest requirement instead of by scanning
// every pod.
type labelIndex struct {
	// byNamespace holds every pod of a namespace.
	byNamespace map[string]map[podID]struct{}
	// byLabel holds the pods of a namespace with a label key=value.
	byLabel map[labelKey]map[podID]struct{}
}

type labelKey struct{ namespace, key, value string }

func newLabelIndex() labelIndex {
	return labelIndex{byNamespace: map[string]map[podID]struct{}{}, byLabel: map[labelKey]map[podID]struct{}{}}
}

func (x *labelIndex) add(ns string, lbls map[string]string, id podID) {
	addTo(x.byNamespace, ns, id)
	for k, v := range lbls {
		addTo(x.byLabel, labelKey{ns, k, v}, id)
	}
}

func (x *labelIndex) remove(ns string, lbls map[string]string, id podID) {
	removeFrom(x.byNamespace, ns, id)
	for k, v := range lbls {
		removeFrom(x.byLabel, labelKey{ns, k, v}, id)
	}
}

func addTo[K comparable](m map[K]map[podID]struct{}, k K, id podID) {
	set, ok := m[k]
	if !ok {
		set = map[podID]struct{}{}
		m[k] = set
	}
	set[id] = struct{}{}
}

func removeFrom[K comparable](m map[K]map[podID]struct{}, k K, id podID) {
	if set, ok := m[k]; ok {
		delete(set, id)
		if len(set) == 0 {
			delete(m, k)
		}
	}
}

// candidates returns a set of pods of the namespace that contains every pod
// sel may match: the smallest posting list of sel's equality requirements,
// or the whole namespace when it has none.
func (x *labelIndex) candidates(ns string, sel labels.Selector) map[podID]struct{} {
	best := x.byNamespace[ns]
	reqs, selectable := sel.Requirements()
	if !selectable {
		return nil
	}
	for _, r := range reqs {
		if r.Operator() != selection.Equals && r.Operator() != selection.DoubleEquals && r.Operator() != selection.In {
			continue
		}
		vals := r.Values().UnsortedList()
		if len(vals) != 1 {
			continue
		}
		set := x.byLabel[labelKey{ns, r.Key(), vals[0]}]
		if len(set) < len(best) {
			best = set
		}
	}
	return best
}
