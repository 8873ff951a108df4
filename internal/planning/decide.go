package planning

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/brief"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// The one decision. The operator, `plan`, `lint` and the admission check
// ask the one question (AskStage, the pre-flight) and hand its verdict,
// with what they observe of the cluster, to Decide: what the migration
// does next is decided here alone, in the operator's order, with the words
// its conditions and findings carry.

// Facts are what a decision hangs on besides the engine's answer.
type Facts struct {
	// InFlight names another migration with a write in flight on a
	// target, and the target ("" when none has).
	InFlight, InFlightOn string
	// Paused are the targets whose rollouts are paused.
	Paused []string
	// Unstable says why the targets' pods are not stable yet (not Ready,
	// younger than guards.minPodAge); "" when they are.
	Unstable string
	// Protected are the names of the pods guards.protectedPods selects.
	Protected map[string]bool
	// Selected is how many workloads the migration targets: more than
	// MaxTargets stop it (TooManyTargets).
	Selected int
	// Outside is a cause outside the migration that stops its targets
	// (OutsideCause); nil when none. It is not asked of a stage that
	// only lowers the constraint.
	Outside *Stop
	// Lowers says that the stage only lowers the constraint to the final
	// stage (the spec lowered it): no capacity, hazard, outside cause or
	// pod is asked about.
	Lowers bool
	// PodView is why the operator's view of a target's pods is not
	// complete yet (its cache behind the workload's status, a
	// controller that cannot make the pods); nil when it is. A plan read
	// from the API server sees every pod and observes none.
	PodView *Stop
}

// Waiting is a decision to wait for something outside the answer: a
// write in flight, a pause, the pods.
const Waiting OutcomeKind = "Waiting"

// Milestone is a condition a decision sets.
type Milestone struct {
	Type    string
	Status  metav1.ConditionStatus
	Reason  string
	Message string
}

// Decision is what the migration does next about a stage, and what its
// status says of it.
type Decision struct {
	Outcome
	// Capacity and Feasible are the CapacityAvailable and Feasible
	// conditions the answer sets; nil when the decision did not reach
	// them (Feasible is not judged without the capacity).
	Capacity, Feasible *Milestone
	// Blocking is the hazard the decision stops at, if any.
	Blocking *placement.Hazard
	// Preflight is the hard stage's pre-flight's finding as the guards
	// weigh it, once the decision reaches it; nil when it found nothing.
	Preflight *placement.Hazard
	// Warning is the pre-flight's finding the guards only warn about, an
	// Event when the stage is written.
	Warning *Milestone
	// Plan and Recreated are what the stage changes on each target and
	// every pod it recreates, once the decision reaches them.
	Plan      []pgv1.TargetPlan
	Recreated map[string][]string
	// Verdict is the engine's answer the decision was made on, pre-flight
	// included when it was asked; empty when a fact held the stage first.
	Verdict Verdict
}

// Question is how a decision asks the engine. Decide asks it only once no
// fact holds the stage, and asks the pre-flight only when it is due and
// the pods are stable: the pre-flight's drains cost many rollouts, and a
// migration waiting for its pods is looked at on every pod change.
type Question interface {
	// Stage asks the first part of the one question about stage
	// (AskStage).
	Stage(stage pgv1.Stage) (Verdict, error)
	// Preflight asks the hard stage's pre-flight of a verdict it is due
	// for (Verdict.AskPreflight).
	Preflight(v *Verdict) error
}

// Answered is a question already answered with v, pre-flight included
// when it was due: plan asks every stage of one snapshot before it
// decides.
func Answered(v Verdict) Question { return answered{v} }

type answered struct{ v Verdict }

func (a answered) Stage(pgv1.Stage) (Verdict, error) { return a.v, nil }
func (a answered) Preflight(*Verdict) error          { return nil }

// Decide is what the migration does next about a stage, in the operator's
// order: what holds the stage before the engine is asked (Held), then the
// engine's answer (q): the capacity, the first blocking hazard (a wait for
// capacity when the migration asks an autoscaler for the nodes that would
// clear it), stable pods, the hard stage's pre-flight as the guards weigh
// it, and the protected pods the stage would recreate. A stage that only
// lowers the constraint to the final stage (Facts.Lowers) asks nothing of
// the engine. The decision carries the verdict it was made on.
func Decide(sit Situation, stage pgv1.Stage, f Facts, q Question) (Decision, error) {
	if d, held := Held(sit, stage, f); held {
		return d, nil
	}
	if f.Lowers {
		return Decision{}.plan(sit, Verdict{Stage: stage}, f), nil
	}
	v, err := q.Stage(stage)
	if err != nil {
		return Decision{}, err
	}
	return judge(sit, v, f, q)
}

// Held is the decision of a fact that holds the stage before the engine
// is asked: too many targets, another migration's claim on the field or
// write in flight, a pause, and, unless the stage only lowers the
// constraint, a cause outside the migration or a view without the
// targets' pods; held is false when none does. A step that writes no new
// stage (a drift corrected, a stage adopted) asks it alone.
func Held(sit Situation, stage pgv1.Stage, f Facts) (_ Decision, held bool) {
	if crowded := TooManyTargets(f.Selected); crowded != nil {
		return stopped(*crowded), true
	}
	if claim := ClaimOf(sit.Intent, sit.Others, sit.Refs()); claim != nil {
		return decided(Blocked, pgv1.ReasonTargetClaimed, claim.Message()), true
	}
	switch {
	case f.InFlight != "":
		return decided(Waiting, pgv1.ReasonWaitingForMigration, fmt.Sprintf(
			"Waiting for PlacementMigration %s, which has a write in flight on %s: one migration changes a workload at a time", f.InFlight, f.InFlightOn)), true
	case len(f.Paused) > 0:
		return decided(Waiting, pgv1.ReasonTargetPaused, fmt.Sprintf(
			"%s is paused (spec.paused): the %s stage is not written while it is, since it would not roll out; it is written once the target resumes (kubectl rollout resume)",
			brief.FirstFew(f.Paused, 3, "; "), stage)), true
	case f.Lowers:
		return Decision{}, false
	case f.Outside != nil:
		return stopped(*f.Outside), true
	case f.PodView != nil:
		return stopped(*f.PodView), true
	}
	return Decision{}, false
}

// judge decides on the engine's answer about the stage, asking the
// pre-flight of q once it is due and the pods are stable.
func judge(sit Situation, v Verdict, f Facts, q Question) (Decision, error) {
	stage := v.Stage
	d := Decision{Verdict: v}
	c := v.Answers[0].Capacity
	if !c.Enough() {
		msg := fmt.Sprintf("%s; waiting for them before the %s stage, nothing has been changed", c.Shortfall(sit.Intent.Constraint.TopologyKey()), stage)
		if stage == pgv1.StageHard {
			msg = fmt.Sprintf("%s; the Soft stage stays applied until they exist", c.Shortfall(sit.Intent.Constraint.TopologyKey()))
		}
		d = d.with(WaitingForCapacity, pgv1.ReasonInsufficientCapacity, msg)
		d.Capacity = &Milestone{Type: pgv1.ConditionCapacityAvailable, Status: metav1.ConditionFalse, Reason: pgv1.ReasonInsufficientCapacity, Message: msg}
		return d, nil
	}
	d.Capacity = &Milestone{Type: pgv1.ConditionCapacityAvailable, Status: metav1.ConditionTrue, Reason: pgv1.ReasonCapacityFound, Message: c.Found()}
	if b := v.FirstBlocking(); b != nil {
		return d.blockedBy(b, v.Request), nil
	}
	names := make([]string, len(v.Stages))
	for i, st := range v.Stages {
		names[i] = string(st)
	}
	d.Feasible = &Milestone{Type: pgv1.ConditionFeasible, Status: metav1.ConditionTrue, Reason: pgv1.ReasonFeasible,
		Message: fmt.Sprintf("The simulated rollout of the %s stage completes on every target", strings.Join(names, " and "))}
	if f.Unstable != "" {
		return d.with(Waiting, pgv1.ReasonWaitingForPods, f.Unstable), nil
	}
	if !v.PreflightAsked && v.PreflightDue(sit.Intent) {
		if err := q.Preflight(&v); err != nil {
			return Decision{}, err
		}
		d.Verdict = v
	}
	if d.Preflight = PreflightOf(sit, v); d.Preflight != nil {
		if d.Preflight.Blocking {
			return d.with(Blocked, d.Preflight.Type, d.Preflight.Message), nil
		}
		d.Warning = &Milestone{Type: corev1.EventTypeWarning, Reason: d.Preflight.Type, Message: d.Preflight.Message}
	}
	return d.plan(sit, v, f), nil
}

// PreflightOf is the hard stage's pre-flight finding of a verdict, worded
// and weighed as the guards weigh it; nil when the pre-flight was not
// asked or found nothing. Plan, lint and the admission check report it as
// the operator's decision does.
func PreflightOf(sit Situation, v Verdict) *placement.Hazard {
	if !v.PreflightAsked || v.Disruptions.OK {
		return nil
	}
	return preflightFinding(sit, v.Disruptions)
}

// preflightFinding is the hard stage's pre-flight as a finding, worded
// and weighed as the guards weigh it: blocking under Block, for
// information under Warn. A change written straight into a workload has
// no stage to keep: its finding is said of the change, for information.
func preflightFinding(sit Situation, dv DisruptionVerdict) *placement.Hazard {
	h := &placement.Hazard{Type: dv.Reason, Workload: dv.Target, Fix: dv.Fix}
	switch {
	case sit.Change:
		h.Message = "once the change has rolled out, " + strings.TrimPrefix(dv.Message, afterHard)
	case sit.Intent.Disruptions == pgv1.DisruptionBlock:
		h.Message, h.Blocking = dv.Message+PreflightBlocks, true
	default:
		h.Message = dv.Message + PreflightWarns
	}
	return h
}

// plan is the last of the decision: what the stage changes, unless it
// recreates a protected pod.
func (d Decision) plan(sit Situation, v Verdict, f Facts) Decision {
	d.Plan, d.Recreated = v.Plan(sit.Targets)
	if hit := recreatesProtected(d.Recreated, f.Protected); hit != "" {
		return d.with(Blocked, pgv1.ReasonProtectedPodChanged, fmt.Sprintf(
			"The %s stage would recreate protected pod(s) %s; remove the workload from the targets or the pods from guards.protectedPods", v.Stage, hit))
	}
	return d.with(Proceeds, "", "")
}

// What the guards make of a pre-flight's finding, said once for the
// operator's conditions and Events and plan's hazards.
const (
	PreflightBlocks = "; the Soft stage stays applied (guards.disruptions: Block; set Warn to apply the Hard stage anyway)"
	PreflightWarns  = " (guards.disruptions: Warn: the Hard stage is applied)"
)

// blockedBy stops at a blocking hazard: a wait for capacity when the
// migration asks an autoscaler for the nodes that let the rollout
// through.
func (d Decision) blockedBy(b *placement.Hazard, req *placement.CapacityRequest) Decision {
	d.Blocking = b
	d.Feasible = &Milestone{Type: pgv1.ConditionFeasible, Status: metav1.ConditionFalse, Reason: b.Type, Message: b.Message}
	if req != nil && req.Shortfall > 0 {
		msg := fmt.Sprintf("%s; %s", req.Why, b.Message)
		d.Capacity = &Milestone{Type: pgv1.ConditionCapacityAvailable, Status: metav1.ConditionFalse, Reason: pgv1.ReasonInsufficientCapacity, Message: msg}
		return d.with(WaitingForCapacity, pgv1.ReasonInsufficientCapacity, msg)
	}
	return d.with(Blocked, b.Type, b.Message)
}

// Detailed adds to what a blocking hazard says a detail only the caller
// can learn (the field managers of a clobbered field), wherever the
// decision carries its words.
func (d Decision) Detailed(detail string) Decision {
	if d.Blocking == nil || detail == "" {
		return d
	}
	d.Message += detail
	if d.Feasible != nil && d.Feasible.Status == metav1.ConditionFalse {
		f := *d.Feasible
		f.Message += detail
		d.Feasible = &f
	}
	if d.Capacity != nil && d.Capacity.Status == metav1.ConditionFalse {
		c := *d.Capacity
		c.Message += detail
		d.Capacity = &c
	}
	return d
}

func (d Decision) with(kind OutcomeKind, reason, message string) Decision {
	d.Outcome = Outcome{Kind: kind, Reason: reason, Message: message}
	return d
}

// stopped is the decision a Stop makes.
func stopped(st Stop) Decision {
	if st.Blocked {
		return decided(Blocked, st.Reason, st.Message)
	}
	return decided(Waiting, st.Reason, st.Message)
}

func decided(kind OutcomeKind, reason, message string) Decision {
	return Decision{Outcome: Outcome{Kind: kind, Reason: reason, Message: message}}
}

// recreatesProtected names the protected pods, by target, that the stage
// would recreate; "" when none.
func recreatesProtected(recreated map[string][]string, protected map[string]bool) string {
	var hits []string
	for ref, pods := range recreated {
		for _, n := range pods {
			if protected[n] {
				hits = append(hits, fmt.Sprintf("%s (of %s)", n, ref))
			}
		}
	}
	sort.Strings(hits)
	return brief.FirstFew(hits, 5, "; ")
}

// Observe gathers the facts plan and lint can read from a cluster read at
// one moment: writes in flight recorded by the other migrations, paused targets, a cause outside the
// migration (with the operator's default grace for Pending pods), the
// targets' pods at now, and the protected pods. The operator
// gathers the same from its cache, its registry of writes in flight and
// its engine's records.
func Observe(sit Situation, protected []*corev1.Pod, now time.Time) Facts {
	refs := make([]pgv1.TargetRef, len(sit.Targets))
	var pods []*corev1.Pod
	var f Facts
	for i, t := range sit.Targets {
		refs[i] = t.Ref
		pods = append(pods, t.Pods...)
		if t.Paused() {
			f.Paused = append(f.Paused, t.String())
		}
	}
	if name, ref := InFlight(sit.Intent, sit.Others, refs); name != "" {
		f.InFlight, f.InFlightOn = name, ref.String()
	}
	f.Outside, _ = OutsideCause(sit.Targets, DefaultUnschedulableGrace, now)
	f.Unstable, _ = Unstable(pods, sit.Intent.MinPodAge, now)
	f.Protected = ProtectedNames(protected)
	return f
}

// ProtectedNames are the names of pods, as Facts.Protected takes them.
func ProtectedNames(pods []*corev1.Pod) map[string]bool {
	names := make(map[string]bool, len(pods))
	for _, p := range pods {
		names[p.Name] = true
	}
	return names
}
