package placement

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// Question asks whether a constraint can be applied at a stage to a set of
// workloads. The workloads' templates are their live templates; the engine
// applies the constraint itself.
type Question struct {
	Workloads  []*Workload
	Constraint Constraint
	Stage      pgv1.Stage
	Capacity   CapacitySpec
	// Companions are workloads outside the question whose pods are counted
	// as the workloads' own, never as strangers: former targets that left
	// the set keeping the constraint (onDelete Retain).
	Companions []*Workload
}

// Answer is the engine's judgement.
type Answer struct {
	Capacity Capacity
	// Rollouts holds each workload's simulated rollout.
	Rollouts map[pgv1.TargetRef]Rollout
	// Templates holds each workload's pod spec with the constraint applied.
	Templates map[pgv1.TargetRef]*corev1.PodSpec
	// EndStates holds, for a hard spread, where each workload's rollout
	// can leave its pods, by "Kind/name".
	EndStates map[pgv1.TargetRef]EndStates
	// Profiles holds the scheduler profile each workload's pods were
	// predicted with: the one their schedulerName names.
	Profiles map[pgv1.TargetRef]string
	Hazards  []Hazard
	// Duration is how long the analysis took.
	Duration time.Duration
}

// Blocking returns the findings that must stop the migration.
func (a Answer) Blocking() []Hazard {
	var out []Hazard
	for _, h := range a.Hazards {
		if h.Blocking {
			out = append(out, h)
		}
	}
	return out
}

// FirstBlocking is the first finding that must stop the migration.
func (a Answer) FirstBlocking() *Hazard {
	for i := range a.Hazards {
		if a.Hazards[i].Blocking {
			return &a.Hazards[i]
		}
	}
	return nil
}

// Analyze answers a question: capacity first, then for each workload the
// findings that need no simulation (clobber, selector overlap), then the
// simulated rollout of the stage. Capacity is judged first because without
// it every rollout fails for a reason that fixes itself when nodes arrive.
func (s *Snapshot) Analyze(q Question) (Answer, error) {
	start := time.Now()
	a := Answer{Rollouts: map[pgv1.TargetRef]Rollout{}, Templates: map[pgv1.TargetRef]*corev1.PodSpec{}, EndStates: map[pgv1.TargetRef]EndStates{}, Profiles: map[pgv1.TargetRef]string{}}
	for _, w := range q.Workloads {
		p, _ := s.profiles.Of(w.Template.Spec.SchedulerName)
		a.Profiles[w.Ref()] = p.Name
	}
	capacity, err := s.CapacityFor(q.Workloads, q.Constraint, q.Capacity)
	if err != nil {
		return a, err
	}
	a.Capacity = capacity
	if !capacity.Enough() {
		a.Hazards = append(a.Hazards, Hazard{
			Type: HazardInsufficientCapacity, Blocking: true,
			Message: fmt.Sprintf("have %s; the constraint on %s needs them before it can be applied", capacity.Shortfall(q.Constraint.TopologyKey()), q.Constraint.TopologyKey()),
		})
		a.Duration = time.Since(start)
		return a, nil
	}
	targets := podsOf(q.Workloads, q.Companions)
	for _, w := range q.Workloads {
		c := q.Constraint.RenderFor(w, q.Workloads)
		if h := s.unknownScheduler(w); h != nil {
			a.Hazards = append(a.Hazards, *h)
		}
		if h := unpredicted(w); h != nil {
			a.Hazards = append(a.Hazards, *h)
		}
		if h := s.staticHazard(w, q, targets); h != nil {
			a.Hazards = append(a.Hazards, *h)
			continue
		}
		spec, err := c.Apply(&w.Template.Spec, w.Selector, q.Stage)
		if err != nil {
			return a, fmt.Errorf("apply %s stage to %s: %w", q.Stage, w.Ref(), err)
		}
		a.Templates[w.Ref()] = spec
		changed := w.WithSpec(spec)
		r, err := s.SimulateRollout(changed)
		if err != nil {
			return a, err
		}
		a.Rollouts[w.Ref()] = r
		if r.Note != "" {
			a.Hazards = append(a.Hazards, Hazard{Type: HazardOnDeleteStrategy, Workload: w.Ref(), Message: r.Note})
		}
		if h := s.rolloutHazard(changed, c, r); h != nil {
			a.Hazards = append(a.Hazards, *h)
			continue
		}
		if q.Stage == pgv1.StageHard {
			h, err := s.strandsOthers(changed, c, r)
			if err != nil {
				return a, err
			}
			if h != nil {
				a.Hazards = append(a.Hazards, *h)
				continue
			}
		}
		if q.Stage != pgv1.StageHard || c.Spread == nil || !r.Completes || r.Note != "" {
			continue
		}
		es, err := s.predictEndStates(changed, c, r)
		if err != nil {
			return a, err
		}
		a.EndStates[w.Ref()] = es
		if h := spreadEndHazard(changed, c, es); h != nil {
			a.Hazards = append(a.Hazards, *h)
		}
	}
	a.Duration = time.Since(start)
	return a, nil
}

// Findings are the hazards of a question that need neither nodes nor a
// simulated rollout: a constraint that would replace one the workload
// already has, and a selector that also selects other workloads' pods.
// They are what can be said of manifests alone.
func (s *Snapshot) Findings(q Question) []Hazard {
	targets := podsOf(q.Workloads, q.Companions)
	var out []Hazard
	for _, w := range q.Workloads {
		if h := unpredicted(w); h != nil {
			out = append(out, *h)
		}
		if h := s.staticHazard(w, q, targets); h != nil {
			out = append(out, *h)
		}
	}
	return out
}

// unpredicted says, for information, when a workload's pods depend on a
// scheduler filter the engine does not model: its answers for them are
// then a guess, and a person should know which part.
func unpredicted(w *Workload) *Hazard {
	if len(w.Template.Spec.ResourceClaims) == 0 {
		return nil
	}
	return &Hazard{Type: HazardNotPredicted, Workload: w.Ref(), Message: fmt.Sprintf(
		"%s: its pods claim devices (resourceClaims), which kube-scheduler's DynamicResources plugin allocates and placement-guard does not model: where they fit is not predicted, only the other filters are",
		w.Ref())}
}

// unknownScheduler blocks a workload whose pods name a scheduler no
// profile the engine was given describes: another scheduler, or a profile
// of the cluster's configuration the engine was not told of, places them,
// and what the engine would answer is its fallback profile's guess. The
// answers still come, with the fallback's filters and scores, for a
// person to read beside this.
func (s *Snapshot) unknownScheduler(w *Workload) *Hazard {
	name, described := s.SchedulerOf(w)
	if described {
		return nil
	}
	why := fmt.Sprintf("which the scheduler configuration given does not describe (it has %s)", strings.Join(s.profiles.Names(), ", "))
	if reason := s.profiles.Unpredictable(name); reason != "" {
		why = "whose profile the engine cannot predict (" + reason + ")"
	}
	return withFixes(&Hazard{Type: HazardUnknownScheduler, Blocking: true, Workload: w.Ref(), Message: fmt.Sprintf(
		"%s: its pods name schedulerName %q, %s: where they land is not predicted.", w.Ref(), name, why)},
		"describe profile "+strconv.Quote(name)+" in --scheduler-config",
		"give --scheduler-config the KubeSchedulerConfiguration whose profile "+strconv.Quote(name)+" schedules these pods, in terms the engine predicts")
}

// staticHazard is the first of a workload's findings that need no
// simulation. The selector is judged as the user wrote it: one that also
// selects another workload's pods says the user meant to count them,
// which the default scoping to one revision would silently undo.
func (s *Snapshot) staticHazard(w *Workload, q Question, targets map[types.UID]bool) *Hazard {
	if h := clobber(w, q.Constraint.RenderFor(w, q.Workloads), q.Stage); h != nil {
		return h
	}
	return s.selectorOverlap(w, q.Constraint, targets)
}

// podsOf is the set of the workloads' pods.
func podsOf(sets ...[]*Workload) map[types.UID]bool {
	out := map[types.UID]bool{}
	for _, workloads := range sets {
		for _, w := range workloads {
			for _, uid := range w.Pods {
				out[uid] = true
			}
		}
	}
	return out
}
