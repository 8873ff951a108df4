package placement

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// rollouts is what the engine knows of how one kind of workload rolls
// out: how its controller replaces pods, the pods of its new revision,
// how the end-state search walks its rollout, and the words of the
// findings that differ by kind. Each kind implements it in files of its
// own (sim_kind_<name>.go, with its _rollout and _search files); nothing
// else in the engine names a kind (`make verify` holds it: hack/kindrule).
type rollouts interface {
	// simulate plays the kind's controller and the scheduler through a
	// rollout of w's template, old being its pods and leaving those the
	// rollout does not replace but that go.
	simulate(s *Snapshot, w *Workload, old, leaving []podID) (Rollout, error)
	// rolledPod is the pod of the new revision the simulation names name.
	rolledPod(s *Snapshot, w *Workload, name string) (*corev1.Pod, error)
	// newRevision is the label and value that tell the simulated new
	// revision's pods apart ("" when the kind's pods carry none).
	newRevision() (label, value string)

	// searchTemplate is the pod the end-state search places; searched
	// says whether the rollout has end states to search at all (an
	// OnDelete StatefulSet's controller replaces nothing).
	searchTemplate(s *Snapshot, w *Workload) *corev1.Pod
	searched(w *Workload) bool
	// startSearch sets the search's bounds from w's strategy, and search
	// walks every order the controller and the scheduler can take.
	startSearch(x *explorer) error
	search(x *explorer)

	// scopesSpreadToRevision says whether a spread written into the kind
	// counts only the new revision (matchLabelKeys: [pod-template-hash])
	// unless asked to count every revision: the rollout only adds pods
	// of one revision, so its end state holds without a search.
	scopesSpreadToRevision() bool
	// surgeLimits are a rolling update's maxSurge and maxUnavailable;
	// ok is false when the kind's rollout keeps no old pod beside a new
	// one (a Recreate strategy, a StatefulSet's replace-in-place).
	surgeLimits(w *Workload) (surge, unavailable int, ok bool, err error)

	// replaced says which pods a spread counts while the rollout
	// replaces them, spreadFix how to keep its end within maxSkew, and
	// overlapFix how to count the workload's own pods alone.
	replaced() string
	spreadFix(c Constraint) string
	overlapFix() string
}

// newRevisionPod is a pod of w's new revision named name, with the label
// that tells the kind's new revision apart, when its pods carry one.
func newRevisionPod(w *Workload, name string) *corev1.Pod {
	label, value := rolloutsOf(w.Kind).newRevision()
	if label == "" {
		return newPod(w, name, nil)
	}
	return newPod(w, name, map[string]string{label: value})
}

// kinds are the kinds the engine simulates, each registered by its file.
var kinds = map[pgv1.WorkloadKind]rollouts{}

// rolloutsOf is the rollout behaviour of a kind; a kind the engine does
// not know simulates nothing and says so.
func rolloutsOf(k pgv1.WorkloadKind) rollouts {
	if r, ok := kinds[k]; ok {
		return r
	}
	return unsupported{kind: k}
}

// unsupported is a kind the engine does not know: every question about
// its rollout is an error, and its findings take the words of none.
type unsupported struct{ kind pgv1.WorkloadKind }

func (u unsupported) err(w *Workload) error {
	return fmt.Errorf("%s: unsupported kind %q", w.Ref(), u.kind)
}

func (u unsupported) simulate(_ *Snapshot, w *Workload, _, _ []podID) (Rollout, error) {
	return Rollout{}, u.err(w)
}
func (u unsupported) rolledPod(_ *Snapshot, w *Workload, _ string) (*corev1.Pod, error) {
	return nil, u.err(w)
}
func (unsupported) newRevision() (string, string) { return "", "" }
func (unsupported) searchTemplate(_ *Snapshot, w *Workload) *corev1.Pod {
	return newPod(w, w.Name+"-new", nil)
}
func (unsupported) searched(*Workload) bool                       { return true }
func (u unsupported) startSearch(x *explorer) error               { return u.err(x.w) }
func (unsupported) search(*explorer)                              {}
func (unsupported) scopesSpreadToRevision() bool                  { return false }
func (unsupported) surgeLimits(*Workload) (int, int, bool, error) { return 0, 0, false, nil }
func (unsupported) replaced() string                              { return "the pods it replaces" }
func (unsupported) spreadFix(Constraint) string                   { return softSpreadFix }
func (unsupported) overlapFix() string                            { return releaseLabelFix }

// Fixes worded alike for the kinds whose pods carry no revision label a
// spread could count by.
const (
	softSpreadFix   = "raise maxSkew, or keep the spread soft (finalStage: Soft)"
	releaseLabelFix = "add a label that tells the releases apart (for example release) to the pods and to matchLabelKeys"
)

// ForWorkload renders the constraint for one kind of workload. A spread on
// a Deployment that names no matchLabelKeys counts only the revision being
// rolled out (matchLabelKeys: [pod-template-hash]) unless AllRevisions is
// set: the old revision's pods, counted while they still run, are removed
// by the rollout, so a rollout legal at every step can end skewed
// (kubernetes#98215, KEP-3243). A StatefulSet replaces each pod in place,
// and its pods below a partition or under OnDelete keep the old revision:
// counting every revision is what keeps its end state within maxSkew, so it
// is left as written.
func (c Constraint) ForWorkload(kind pgv1.WorkloadKind) Constraint {
	if c.Spread == nil || !rolloutsOf(kind).scopesSpreadToRevision() || len(c.Spread.MatchLabelKeys) > 0 || c.Spread.AllRevisions {
		return c
	}
	scoped := *c.Spread
	scoped.MatchLabelKeys = []string{appsv1.DefaultDeploymentUniqueLabelKey}
	return Constraint{Spread: &scoped}
}

// RenderFor renders the constraint for w, one of the workloads a migration
// targets together. A spread whose selector also selects another target's
// pods counts the set together (incident 004: controllers spread over
// nodes by a shared part-of label), and scoping it to one revision would
// count each workload alone, so it is written as given.
func (c Constraint) RenderFor(w *Workload, all []*Workload) Constraint {
	if c.Spread == nil || c.Spread.Selector == nil {
		return c.ForWorkload(w.Kind)
	}
	sel, err := metav1.LabelSelectorAsSelector(c.Spread.Selector)
	if err != nil {
		return c
	}
	for _, other := range all {
		if other != w && sel.Matches(labels.Set(other.Template.Labels)) {
			return c
		}
	}
	return c.ForWorkload(w.Kind)
}
