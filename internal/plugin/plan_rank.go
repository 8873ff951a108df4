package plugin

import (
	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/fleet"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// Level ranks a plan, the one rank its exit code (against --fail-on) and
// a fleet's matrix both read:
//   - Blocked: a target is missing, the operator's decision on the next
//     stage is Blocked (a protected pod, another migration's claim), or a
//     stage has a blocking finding the operator would stop at when it gets
//     there (a deadlock, a selector overlap, ...);
//   - Warn: the migration would wait, for its capacity (a stage short of
//     qualifying nodes: the operator waits for them, it does not stop), its
//     pods or another migration;
//   - OK: it proceeds, every stage feasible.
func (r Report) Level() fleet.Level {
	if len(r.Missing) > 0 || (r.Verdict != nil && r.Verdict.Outcome == string(planning.Blocked)) {
		return fleet.Blocked
	}
	waits := r.Verdict != nil && r.Verdict.Outcome != string(planning.Proceeds)
	for _, s := range r.Stages {
		for _, h := range s.Hazards {
			if h.Severity != pgv1.SeverityBlocking {
				continue
			}
			if h.Type != placement.HazardInsufficientCapacity {
				return fleet.Blocked
			}
			waits = true
		}
	}
	if waits {
		return fleet.Warn
	}
	return fleet.OK
}
