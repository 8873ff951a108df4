package controller

import (
	"fmt"
	"sync"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// Which migration may write a field of a shared target is planning's
// question (planning.ClaimOf), asked alike by the operator, plan and lint.
// The operator adds what only it knows: at most one migration has a write
// in flight on a workload at a time, so that each stage's rollout is
// judged alone.

// inFlightOn is the other migration with a write in flight on one of the
// group's targets, from the cache or, for a write recorded since the cache
// last heard of it, from the registry.
func (s *scope) inFlightOn(group []*target) (string, *target) {
	for _, t := range group {
		if owner := s.r.inflight.owner(s.key(t.Ref)); owner != "" && owner != s.pm.Name {
			return owner, t
		}
	}
	name, ref := planning.InFlight(s.intent(), s.others, refsOf(group))
	if name == "" {
		return "", nil
	}
	return name, s.target(ref.Kind, ref.Name)
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
// what it had before; an intent held through a soak has nothing in
// flight.
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
	if op == nil || op.Held() {
		return
	}
	for _, ot := range op.Targets {
		r.owners[fmt.Sprintf("%s/%s/%s", namespace, ot.Kind, ot.Name)] = name
	}
}
