package controller

import (
	"fmt"
	"sync"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// Several migrations may target one workload. Each writes with its own
// field manager, so compatible constraints (a zone spread and a hostname
// spread) live side by side. Two constraints that would write the same
// field cannot: the pod anti-affinity term lists are atomic (a writer owns
// a list whole), and spread constraints are keyed by topologyKey and
// whenUnsatisfiable. The migration that holds the field keeps it; the
// other is Blocked, naming it, and writes nothing. And at most one
// migration has a write in flight on a workload at a time, so that each
// stage's rollout is judged alone.

// compatible reports whether two constraints can share a workload.
func compatible(a, b pgv1.Constraint) bool {
	switch {
	case a.PodAntiAffinity != nil && b.PodAntiAffinity != nil:
		return false
	case a.TopologySpread != nil && b.TopologySpread != nil:
		return a.TopologySpread.TopologyKey != b.TopologySpread.TopologyKey
	}
	return true
}

// holds reports whether migration o has written, or is writing, target ref.
func holds(o *pgv1.PlacementMigration, ref pgv1.TargetRef) bool {
	if o.Status.Operation != nil {
		for _, ot := range o.Status.Operation.Targets {
			if ot.Kind == ref.Kind && ot.Name == ref.Name {
				return true
			}
		}
	}
	for _, ts := range o.Status.Targets {
		if ts.Kind == ref.Kind && ts.Name == ref.Name && (ts.Applied != nil || (ts.Stage != "" && ts.Stage != pgv1.StageNone)) {
			return true
		}
	}
	return false
}

// targetsOf reports whether migration o has target ref among its targets.
func targetsOf(o *pgv1.PlacementMigration, ref pgv1.TargetRef) bool {
	for _, ts := range o.Status.Targets {
		if ts.Kind == ref.Kind && ts.Name == ref.Name {
			return true
		}
	}
	return false
}

// olderThan orders migrations by creation, then name: the older one takes
// a field neither holds yet.
func olderThan(a, b *pgv1.PlacementMigration) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// claimedBy is the other migration that holds, or goes first for, a field
// this migration would write on one of the group's targets.
func (s *scope) claimedBy(group []*target) (*pgv1.PlacementMigration, *target) {
	for i := range s.others {
		o := &s.others[i]
		if !o.DeletionTimestamp.IsZero() || compatible(s.pm.Spec.Constraint, o.Spec.Constraint) {
			continue
		}
		for _, t := range group {
			if holds(o, t.Ref) && !holds(s.pm, t.Ref) {
				return o, t
			}
			if targetsOf(o, t.Ref) && !holds(s.pm, t.Ref) && olderThan(o, s.pm) {
				return o, t
			}
		}
	}
	return nil, nil
}

// inFlightOn is the other migration with a write in flight on one of the
// group's targets, from the cache or, for a write recorded since the cache
// last heard of it, from the registry.
func (s *scope) inFlightOn(group []*target) (string, *target) {
	for _, t := range group {
		if owner := s.r.inflight.owner(s.key(t.Ref)); owner != "" && owner != s.pm.Name {
			return owner, t
		}
		for i := range s.others {
			if op := s.others[i].Status.Operation; op != nil {
				for _, ot := range op.Targets {
					if ot.Kind == t.Ref.Kind && ot.Name == t.Ref.Name {
						return s.others[i].Name, t
					}
				}
			}
		}
	}
	return "", nil
}

// key names a workload across the cluster, for the registry and the budget.
func (s *scope) key(ref pgv1.TargetRef) string {
	return fmt.Sprintf("%s/%s/%s", s.pm.Namespace, ref.Kind, ref.Name)
}

// registry remembers, per workload, the migration with a write in flight,
// as soon as its journal is recorded: the cache may not have heard of it
// when the next migration looks.
type registry struct {
	mu     sync.Mutex
	owners map[string]string
}

func (r *registry) owner(workload string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.owners[workload]
}

// track records the workloads migration name has in flight, replacing
// what it had before.
func (r *registry) track(namespace, name string, op *pgv1.Operation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.owners == nil {
		r.owners = map[string]string{}
	}
	prefix := namespace + "/"
	for k, v := range r.owners {
		if v == name && len(k) > len(prefix) && k[:len(prefix)] == prefix {
			delete(r.owners, k)
		}
	}
	if op == nil {
		return
	}
	for _, ot := range op.Targets {
		r.owners[fmt.Sprintf("%s/%s/%s", namespace, ot.Kind, ot.Name)] = name
	}
}
