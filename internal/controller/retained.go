package controller

import (
	"context"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// Leaving the set. A workload that stops being a target (its label no
// longer matches the targetSelector, or it is taken off spec.targets) is
// released as spec.onDelete says: with Revert the migration removes its
// entry, a recorded operation like any write; with Retain it keeps the
// entry, and the migration keeps counting its pods with the targets'
// (status.retained), since they are placed by the very same rule: a
// settled migration is never Blocked for pods that carry its own
// constraint. Either way the targets that stay are not written again.

// loadRetained reads the workloads that left keeping the entry, and notes
// which records still hold: not gone, not re-created, not a target again,
// still carrying the entry. The status is changed by observeRetained, in
// the step, where every change of a reconcile is recorded.
func (s *scope) loadRetained(ctx context.Context) error {
	for _, rt := range s.pm.Status.Retained {
		if s.target(rt.Kind, rt.Name) != nil {
			continue
		}
		w, err := s.loadWorkload(ctx, pgv1.TargetRef{Kind: rt.Kind, Name: rt.Name})
		if err != nil {
			return err
		}
		if w == nil || string(w.UID()) != rt.UID || !placement.Carries(&w.Template().Spec, planning.EntryOf(rt.Applied)) {
			continue
		}
		s.retainedKept = append(s.retainedKept, rt)
		s.retained = append(s.retained, w)
	}
	return nil
}

// observeRetained drops the records of retained workloads that no longer
// hold.
func (s *scope) observeRetained() {
	s.pm.Status.Retained = s.retainedKept
}

// retain records a workload that leaves the set keeping its entry.
func (s *scope) retain(ts pgv1.TargetStatus) {
	if ts.Applied == nil {
		return
	}
	for _, rt := range s.pm.Status.Retained {
		if rt.Kind == ts.Kind && rt.Name == ts.Name {
			return
		}
	}
	s.pm.Status.Retained = append(s.pm.Status.Retained, pgv1.RetainedTarget{Kind: ts.Kind, Name: ts.Name, UID: ts.UID, Applied: ts.Applied})
}

// companions are the workloads of the retained targets, for the engine.
func (s *scope) companions() []*placement.Workload {
	out := make([]*placement.Workload, len(s.retained))
	for i, w := range s.retained {
		out[i] = w.Workload
	}
	return out
}
