package controller

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/clusterstate"
)

// interestOf is what the migration read this reconcile depends on once
// it has settled (clusterstate.Interest). A selector that does not parse
// cannot narrow anything: the migration is then told of every change, as
// one at work is.
func (s *scope) interestOf() *clusterstate.Interest {
	if !settled(s.pm) {
		return clusterstate.AtWork
	}
	in := &clusterstate.Interest{Settled: true, Workloads: map[pgv1.TargetRef]bool{}}
	for _, ref := range s.pm.Spec.Targets {
		in.Workloads[ref] = true
	}
	if ts := s.pm.Spec.TargetSelector; ts != nil {
		sel, err := metav1.LabelSelectorAsSelector(ts.Selector.AsMeta())
		if err != nil {
			return clusterstate.AtWork
		}
		in.Selector = sel
	}
	selectors := []*metav1.LabelSelector{}
	for _, t := range s.targets {
		in.Workloads[t.Ref] = true
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
			return clusterstate.AtWork
		}
		in.Pods = append(in.Pods, sel)
	}
	return in
}
