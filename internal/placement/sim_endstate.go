package placement

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// DefaultEndStateBudget bounds the distinct rollout states PredictEndStates
// visits; small clusters are explored exhaustively well within it.
const DefaultEndStateBudget = 20000

// maxEndStateWork bounds the node checks of one search, so that a large
// cluster, where each state has many candidate nodes, stops in about the
// time of a few rollout simulations.
const maxEndStateWork = 1_000_000

// EndState is one way a rollout can leave a workload under a hard spread.
type EndState struct {
	// NewPods counts the new revision's pods per eligible domain of the
	// spread's topology key, empty domains included.
	NewPods map[string]int
	// Counted counts, per eligible domain, the pods the applied spread
	// selects once the rollout is over: what the scheduler measures the
	// skew on, and what verification measures.
	Counted map[string]int
	// Skew is the largest count minus the global minimum, as the scheduler
	// computes it (minDomains included).
	Skew int
	// Holds is true when Skew is within maxSkew.
	Holds bool
}

// EndStates are the ways a rollout can end. The scheduler chooses among
// the feasible nodes by scores the engine does not reproduce, the
// ReplicaSet controller chooses among equally ranked old pods in an order
// it does not define, and whether the scheduler sees a deletion before it
// places the next pod is a race: every such choice is explored.
type EndStates struct {
	// States are the distinct end states, in a stable order.
	States []EndState
	// Stuck is true when some order of events leaves a new pod Pending
	// with nothing left that could free room for it.
	Stuck bool
	// Exhaustive is false when the budget ran out first; States then holds
	// the end states found so far.
	Exhaustive bool
	// Explored is how many distinct states were visited.
	Explored int
	// Proven is true when the end state holds whatever the order, without
	// a search: a Deployment's spread that counts only the new revision.
	Proven bool
	// TopologyKey and MaxSkew are those of the spread judged.
	TopologyKey string
	MaxSkew     int
}

// Skewed returns the end states outside maxSkew.
func (es EndStates) Skewed() []EndState {
	var out []EndState
	for _, st := range es.States {
		if !st.Holds {
			out = append(out, st)
		}
	}
	return out
}

// Summary says in words where the rollout leaves the new pods.
func (es EndStates) Summary() string {
	if len(es.States) == 0 {
		return "no end state predicted"
	}
	shown := make([]string, 0, 3)
	for _, st := range es.States {
		if len(shown) == cap(shown) {
			break
		}
		shown = append(shown, "("+DescribeCounts(st.NewPods)+")")
	}
	more := ""
	if n := len(es.States) - len(shown); n > 0 {
		more = fmt.Sprintf(" and %d more", n)
	}
	verdict := fmt.Sprintf("all within maxSkew %d", es.MaxSkew)
	if bad := len(es.Skewed()); bad > 0 {
		verdict = fmt.Sprintf("%d beyond maxSkew %d", bad, es.MaxSkew)
	}
	partial := ""
	if es.Proven {
		verdict = fmt.Sprintf("within maxSkew %d whatever the order, as only the new revision is counted", es.MaxSkew)
	} else if !es.Exhaustive {
		partial = fmt.Sprintf(" (a partial search: %d states explored)", es.Explored)
	}
	return fmt.Sprintf("new pods per %s: %s%s; %d possible end state(s), %s%s",
		es.TopologyKey, strings.Join(shown, " or "), more, len(es.States), verdict, partial)
}

// PredictEndStates explores how the rollout of w.Template, which carries
// the hard stage of the spread c (as rendered for w), can leave the pods.
// Only hard spreads are judged: a ScheduleAnyway spread never filters, and
// an anti-affinity term that holds at every placement holds at the end,
// because the rollout only removes the other pods. A StatefulSet with the
// OnDelete strategy does not roll out, so it has no end state to predict.
func (s *Snapshot) PredictEndStates(w *Workload, c Constraint, budget int) (EndStates, error) {
	if c.Spread == nil {
		return EndStates{}, fmt.Errorf("predict end states of %s: the constraint is not a topology spread", w.Ref())
	}
	if budget <= 0 {
		budget = DefaultEndStateBudget
	}
	es := EndStates{TopologyKey: c.Spread.TopologyKey, MaxSkew: int(max(c.Spread.MaxSkew, 1)), Exhaustive: true}
	k := rolloutsOf(w.Kind)
	if !k.searched(w) {
		return es, nil
	}
	x, err := s.newExplorer(w, c, budget)
	if err != nil {
		return es, fmt.Errorf("predict end states of %s: %w", w.Ref(), err)
	}
	if x.ours < 0 {
		return es, fmt.Errorf("predict end states of %s: the template carries no DoNotSchedule spread on %s", w.Ref(), c.Spread.TopologyKey)
	}
	k.search(x)
	es.Stuck, es.Exhaustive, es.Explored = x.stuck, !x.cut, len(x.seen)
	keys := make([]string, 0, len(x.outcomes))
	for k := range x.outcomes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		es.States = append(es.States, x.outcomes[k])
	}
	return es, nil
}

// ourSpread finds, among the template's DoNotSchedule spreads in the order
// the evaluator counts them, the one c renders to.
func ourSpread(spec *corev1.PodSpec, c Constraint, own *Workload) int {
	hard := c.Spread.SpreadConstraint(own.Selector, pgv1.StageHard)
	k := 0
	for _, tsc := range spec.TopologySpreadConstraints {
		if tsc.WhenUnsatisfiable != corev1.DoNotSchedule {
			continue
		}
		if equalSpread(tsc, hard) {
			return k
		}
		k++
	}
	return -1
}

// record adds the current, finished state to the outcomes.
func (x *explorer) record() {
	st := x.e.spreads[x.ours]
	end := EndState{NewPods: map[string]int{}, Counted: map[string]int{}}
	for d, present := range st.present {
		if present {
			end.NewPods[st.topo.names[d]] = 0
			end.Counted[st.topo.names[d]] = int(st.counts[d])
		}
	}
	for i, n := range x.newOn {
		if d := st.topo.domainOf[i]; n > 0 && d >= 0 && st.present[d] {
			end.NewPods[st.topo.names[d]] += int(n)
		}
	}
	hi := 0
	for _, n := range end.Counted {
		hi = max(hi, n)
	}
	st.minDirty = true
	end.Skew = hi - int(st.minMatch())
	end.Holds = end.Skew <= st.c.maxSkew
	x.outcomes[DescribeCounts(end.NewPods)+"|"+DescribeCounts(end.Counted)] = end
}

// predictEndStates predicts the end states of a rollout the simulation
// found to complete. A Deployment's spread that counts only the new
// revision holds at the end whatever the order: the rollout only adds pods
// of that revision, so the global minimum never falls, and each pod was
// within maxSkew of it when placed. Its end state is shown from the
// simulated rollout, without a search. Every other spread is searched.
func (s *Snapshot) predictEndStates(w *Workload, c Constraint, r Rollout) (EndStates, error) {
	if rolloutsOf(w.Kind).scopesSpreadToRevision() && c.Spread.RevisionScoped() {
		return s.endStateOf(w, c, r)
	}
	return s.PredictEndStates(w, c, DefaultEndStateBudget)
}

// endStateOf is where the simulated rollout r left the new pods.
func (s *Snapshot) endStateOf(w *Workload, c Constraint, r Rollout) (EndStates, error) {
	es := EndStates{TopologyKey: c.Spread.TopologyKey, MaxSkew: int(max(c.Spread.MaxSkew, 1)), Exhaustive: true, Proven: true}
	pod := newRevisionPod(w, w.Name+"-new")
	e, err := s.newSpreadEvaluator(pod)
	if err != nil {
		return es, fmt.Errorf("end state of %s: %w", w.Ref(), err)
	}
	k := ourSpread(&w.Template.Spec, c, w)
	if k < 0 {
		return es, fmt.Errorf("end state of %s: the template carries no DoNotSchedule spread on %s", w.Ref(), c.Spread.TopologyKey)
	}
	st := e.spreads[k]
	end := EndState{NewPods: map[string]int{}}
	for d, present := range st.present {
		if present {
			end.NewPods[st.topo.names[d]] = 0
		}
	}
	for _, step := range r.Steps {
		if step.Node == "" || step.Action == StepDelete {
			continue
		}
		if id, ok := s.nodeByName[step.Node]; ok {
			if d := e.domainOfNode(st.topo, id); d >= 0 && st.present[d] {
				end.NewPods[st.topo.names[d]]++
			}
		}
	}
	end.Counted = end.NewPods
	lo, hi := -1, 0
	for _, n := range end.Counted {
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	if lo < 0 || st.numDomains < st.c.minDomains {
		lo = 0
	}
	end.Skew = hi - lo
	end.Holds = end.Skew <= st.c.maxSkew
	es.States = []EndState{end}
	return es, nil
}

// spreadEndHazard blocks a hard spread whose rollout can end outside
// maxSkew, giving the worst predicted distribution and the fix.
func spreadEndHazard(w *Workload, c Constraint, es EndStates) *Hazard {
	skewed := es.Skewed()
	if len(skewed) == 0 {
		if es.Exhaustive || es.Proven {
			return nil
		}
		return withFix(&Hazard{Type: HazardSpreadEndsSkewed, Workload: w.Ref(), Message: fmt.Sprintf(
			"%s: the search for rollout orders that end beyond maxSkew %d stopped after %d states without finding one; the end state is not proven.",
			w.Ref(), es.MaxSkew, es.Explored)}, spreadFix(w, c))
	}
	worst := skewed[0]
	for _, st := range skewed[1:] {
		if st.Skew > worst.Skew {
			worst = st
		}
	}
	counts := rolloutsOf(w.Kind).replaced()
	return withFix(&Hazard{
		Type: HazardSpreadEndsSkewed, Blocking: true, Workload: w.Ref(),
		Message: fmt.Sprintf("%s: every step of the rollout would be legal, yet it can end with the pods at %s over %s: skew %d > maxSkew %d (%d of %d predicted end states), because the spread counts %s while they still run.",
			w.Ref(), DescribeCounts(worst.Counted), es.TopologyKey, worst.Skew, es.MaxSkew, len(skewed), len(es.States), counts),
	}, spreadFix(w, c))
}

func spreadFix(w *Workload, c Constraint) string {
	return rolloutsOf(w.Kind).spreadFix(c)
}
