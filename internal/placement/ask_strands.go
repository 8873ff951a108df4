package placement

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/placement-guard/placement-guard/internal/brief"
)

// A required anti-affinity term is a wall both ways: the scheduler keeps
// an incoming pod out of every domain where an existing pod's required
// anti-affinity term selects it. A term aimed at another namespace's pods
// (its namespaces or namespaceSelector naming them) therefore keeps those
// pods, whoever owns them, off every domain the workload's pods come to
// hold: once they are recreated (a rollout, a drain, an eviction) they may
// find no node. Nothing in their own namespace says why.

// maxStrandedWorkloads bounds the other namespaces' workloads a term is
// judged against: each costs a placement of its pods twice.
const maxStrandedWorkloads = 8

// foreignWorkload is the pods of one controller in another namespace that
// a term selects.
type foreignWorkload struct {
	owner    string
	workload *Workload
}

// strandsOthers finds the pods of other namespaces that w's completed
// rollout r, with c's anti-affinity term, would leave unplaceable: those
// of a controller of which fewer pods could be placed again after the
// rollout than before it. Each is counted with one pod more than it runs,
// the room it needs to replace one: its next rollout's surge pod, or a
// drained node's pod. A term that takes the last domain a workload kept
// apart could move to leaves it deadlocked at its next rollout, though
// none of its pods moves now.
func (s *Snapshot) strandsOthers(w *Workload, c Constraint, r Rollout) (*Hazard, error) {
	a := c.AntiAffinity
	if a == nil || !r.Completes || !reachesOtherNamespaces(a, w.Namespace) {
		return nil, nil
	}
	owner := newRevisionPod(w, w.Name+"-strands")
	term, err := newAffinityTerm(owner, ptrTo(a.AffinityTerm(w.Selector)))
	if err != nil {
		return nil, err
	}
	others := s.foreignWorkloads(&term, w.Namespace)
	before := make([]int, len(others))
	for i, o := range others {
		if before[i], err = s.Unplaceable(o.workload); err != nil {
			return nil, err
		}
	}
	var stranded []string
	err = s.WithRolledOut(w, r, func(*Workload, []*corev1.Pod) error {
		for i, o := range others {
			after, err := s.Unplaceable(o.workload)
			if err != nil {
				return err
			}
			if after > before[i] {
				stranded = append(stranded, fmt.Sprintf("%d of the %d pods of %s and the one to replace them", after-before[i], o.workload.Replicas-1, o.owner))
			}
		}
		return nil
	})
	if err != nil || len(stranded) == 0 {
		return nil, err
	}
	return withFixes(&Hazard{
		Type: HazardStrandsOthers, Blocking: true, Workload: w.Ref(),
		Message: fmt.Sprintf("%s: %s could not be placed once recreated. Its required anti-affinity term on %s selects pods of other namespaces, and the scheduler keeps them off every domain its pods would hold.",
			w.Ref(), brief.FirstFew(stranded, 3, ", "), a.TopologyKey),
	}, "aim the term at its own namespace's pods", "aim the term at the workload's own namespace's pods (drop its namespaces and namespaceSelector), or select a label only they carry"), nil
}

// reachesOtherNamespaces reports a term whose namespaces, or whose
// namespace selector, may name namespaces other than own.
func reachesOtherNamespaces(a *AntiAffinity, own string) bool {
	return a.NamespaceSelector != nil || slices.ContainsFunc(a.Namespaces, func(ns string) bool { return ns != own })
}

// foreignWorkloads are the controllers of other namespaces' running pods
// that t selects, by namespace and controller name, at most
// maxStrandedWorkloads of them. A pod no controller owns is left out: it
// is never recreated.
func (s *Snapshot) foreignWorkloads(t *affinityTerm, own string) []foreignWorkload {
	namespaces := t.namespaces.Clone()
	if t.hasNSSelector {
		for name, ns := range s.namespaces {
			if t.nsSelector.Matches(labels.Set(ns.Labels)) {
				namespaces.Insert(name)
			}
		}
	}
	namespaces.Delete(own)
	byOwner := map[types.UID]*foreignWorkload{}
	for _, ns := range namespaces.UnsortedList() {
		nsLabels := namespaceLabels(s, ns)
		for id := range s.labels.candidates(ns, t.selector) {
			pi := s.pods[id]
			if pi.terminating() || pi.node == noNode || !t.matches(pi.common(), nsLabels) {
				continue
			}
			ref := metav1.GetControllerOfNoCopy(pi.common())
			if ref == nil {
				continue
			}
			fw, ok := byOwner[ref.UID]
			if !ok {
				pod := pi.common()
				fw = &foreignWorkload{owner: ns + "/" + ref.Name, workload: &Workload{Namespace: ns, Name: ref.Name,
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: pod.Spec}}}
				byOwner[ref.UID] = fw
			}
			fw.workload.Pods = append(fw.workload.Pods, pi.uid)
			fw.workload.Replicas++
		}
	}
	out := make([]foreignWorkload, 0, len(byOwner))
	for _, fw := range byOwner {
		// Room to replace one pod: what a rollout or a drain asks of it.
		fw.workload.Replicas++
		out = append(out, *fw)
	}
	slices.SortFunc(out, func(a, b foreignWorkload) int { return cmp.Compare(a.owner, b.owner) })
	return out[:min(len(out), maxStrandedWorkloads)]
}
