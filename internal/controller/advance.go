package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/metrics"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/workloadpatch"
)

// advance takes the checks that come before every stage, in order, and
// records the intent to apply it when they pass: no other migration holds
// the field or has a write in flight, capacity, feasibility of this stage
// and of the final one, stable pods, the server-side dry run and the
// protected pods, the write budget. A stage that only lowers the
// constraint to the final stage (the spec lowered it) needs none of the
// checks about capacity and pods.
func (s *scope) advance(ctx context.Context, group []*target, stage placement.Stage) (outcome, error) {
	pm := s.pm
	final := placement.Stage(pm.Spec.Final())
	waiting := pgv1.PhasePending
	if stage == placement.StageHard {
		waiting = pgv1.PhaseSoaking
	}
	if o, ok := s.checkOthers(group, waiting); ok {
		return o, nil
	}
	lowering := rank(stage) < rank(s.verified(group[0]))
	var answers []placement.Answer
	if !lowering {
		stages := []placement.Stage{stage}
		if stage != final {
			stages = append(stages, final)
		}
		var err error
		if answers, err = s.analyze(group, stages); err != nil {
			return outcome{}, err
		}
		if o, ok := s.checkCapacity(answers[0].Capacity, stage); ok {
			return o, nil
		}
		if o, ok := s.checkFeasible(answers, stages); ok {
			return o, nil
		}
		if o, ok := s.checkPodsStable(group, waiting); ok {
			return o, nil
		}
	}
	plan, recreated, o, blocked, err := s.plan(ctx, group, stage, answers)
	if err != nil || blocked {
		return o, err
	}
	pm.Status.Plan = plan
	protected, err := s.protectedPods(ctx)
	if err != nil {
		return outcome{}, err
	}
	if hit := recreatesProtected(recreated, protected); hit != "" {
		return outcome{phase: pgv1.PhaseBlocked, reason: pgv1.ReasonProtectedPodChanged, message: fmt.Sprintf(
			"The %s stage would recreate protected pod(s) %s; remove the workload from the targets or the pods from guards.protectedPods", stage, hit)}, nil
	}
	if pm.Spec.DryRun {
		return outcome{phase: pgv1.PhasePlanned, reason: pgv1.ReasonPlanned, message: planSummary(stage, plan) + "; dry run, nothing was changed"}, nil
	}
	for _, t := range group {
		if !s.r.Budget.Allow(s.key(t.ref), s.now) {
			return s.budgetExceeded(t.ref), nil
		}
	}
	op := s.newOperation(pgv1.ActionApplyStage, s.verified(group[0]), stage)
	for _, t := range group {
		op.Targets = append(op.Targets, s.operationTarget(t, t.entry(stage), s.currentEntry(t)))
	}
	pm.Status.ProtectedPods = protectedRecordOf(protected, s.now)
	setCondition(pm, s.now, stageCondition(stage), metav1.ConditionFalse, pgv1.ReasonIntentRecorded, fmt.Sprintf("The %s stage is recorded and about to be written", stage))
	return s.recordIntent(op, outcome{phase: applyingPhase(stage), reason: pgv1.ReasonIntentRecorded,
		message: fmt.Sprintf("Recorded the %s stage for %s; writing it next", stage, targetNames(group))}), nil
}

// currentEntry is the migration's entry the target carries now, which a
// rollback of the next write restores.
func (s *scope) currentEntry(t *target) *corev1.PodSpec {
	ts := s.status(t.ref)
	if ts.Applied != nil && placement.Carries(&t.Template().Spec, entryOf(ts.Applied)) {
		return entryOf(ts.Applied)
	}
	return t.entry(t.rendered.StageOf(&t.Template().Spec, t.Selector()))
}

// checkOthers waits for, or stops before, the other migrations of the
// group's targets.
func (s *scope) checkOthers(group []*target, waiting pgv1.Phase) (outcome, bool) {
	if o, t := s.claimedBy(group); o != nil {
		return outcome{phase: pgv1.PhaseBlocked, reason: pgv1.ReasonTargetClaimed, message: fmt.Sprintf(
			"%s is also a target of PlacementMigration %s, whose constraint writes the same field (%s); one migration writes a field at a time, and %s came first. Nothing was written: delete one of the two, or spread on another key",
			t, o.Name, fieldOf(s.pm.Spec.Constraint), o.Name)}, true
	}
	if name, t := s.inFlightOn(group); name != "" {
		return outcome{phase: waiting, reason: pgv1.ReasonWaitingForMigration, message: fmt.Sprintf(
			"Waiting for PlacementMigration %s, which has a write in flight on %s: one migration changes a workload at a time", name, t)}, true
	}
	return outcome{}, false
}

func fieldOf(c pgv1.Constraint) string {
	if c.PodAntiAffinity != nil {
		return "the pod anti-affinity term lists"
	}
	return "the spread on " + c.TopologySpread.TopologyKey
}

// analyze asks the engine about each stage, against one snapshot. Each
// workload is judged with the other migrations' constraints present at
// their final stage, so that two compatible migrations do not each pass
// on a cluster that cannot hold both.
func (s *scope) analyze(group []*target, stages []placement.Stage) ([]placement.Answer, error) {
	workloads := make([]*placement.Workload, len(group))
	for i, t := range group {
		workloads[i] = s.withOthers(t)
	}
	spec := s.pm.Spec.CapacityOrEmpty()
	capacity := placement.CapacitySpec{NodeSelector: spec.NodeSelector.AsMeta(), MinNodes: spec.MinNodes, MinDomains: spec.MinDomains}
	answers := make([]placement.Answer, 0, len(stages))
	err := s.r.State.With(func(snap *placement.Snapshot) error {
		for _, stage := range stages {
			a, err := snap.Analyze(placement.Question{Workloads: workloads, Constraint: s.constraint, Stage: stage, Capacity: capacity})
			if err != nil {
				return fmt.Errorf("analyze the %s stage: %w", stage, err)
			}
			metrics.ObserveEvaluation(a.Duration)
			answers = append(answers, a)
		}
		return nil
	})
	return answers, err
}

// withOthers is the target's workload with the final stage of every other
// compatible migration of it added to the template.
func (s *scope) withOthers(t *target) *placement.Workload {
	w := t.Workload
	for i := range s.others {
		o := &s.others[i]
		if !targetsOf(o, t.ref) || !compatible(s.pm.Spec.Constraint, o.Spec.Constraint) || !o.DeletionTimestamp.IsZero() {
			continue
		}
		c := constraintFromSpec(o.Spec.Constraint).RenderFor(w, []*placement.Workload{w})
		spec, err := c.Apply(&w.Template.Spec, w.Selector, placement.Stage(o.Spec.Final()))
		if err != nil {
			continue
		}
		copied := *w
		copied.Template = *w.Template.DeepCopy()
		copied.Template.Spec = *spec
		w = &copied
	}
	return w
}

// checkCapacity waits, patching nothing, until the qualifying nodes exist.
func (s *scope) checkCapacity(c placement.Capacity, stage placement.Stage) (outcome, bool) {
	pm := s.pm
	nodes := c.Nodes
	if len(nodes) > 10 {
		nodes = nodes[:10]
	}
	pm.Status.Capacity = &pgv1.CapacityStatus{
		QualifyingNodes: int32(c.QualifyingNodes), RequiredNodes: int32(c.RequiredNodes),
		QualifyingDomains: int32(c.QualifyingDomains), RequiredDomains: int32(c.RequiredDomains),
		Nodes: nodes, Summary: c.Summary(),
	}
	key := s.constraint.TopologyKey()
	if !c.Enough() {
		msg := fmt.Sprintf("%s; waiting for them before the %s stage, nothing has been changed", c.Shortfall(key), stage)
		if stage == placement.StageHard {
			msg = fmt.Sprintf("%s; the Soft stage stays applied until they exist", c.Shortfall(key))
		}
		setCondition(pm, s.now, pgv1.ConditionCapacityAvailable, metav1.ConditionFalse, pgv1.ReasonInsufficientCapacity, msg)
		meta.RemoveStatusCondition(&pm.Status.Conditions, pgv1.ConditionFeasible)
		pm.Status.Hazards = nil
		return outcome{phase: pgv1.PhaseWaitingForCapacity, reason: pgv1.ReasonWaitingForCapacity, message: msg}, true
	}
	setCondition(pm, s.now, pgv1.ConditionCapacityAvailable, metav1.ConditionTrue, pgv1.ReasonCapacityFound,
		fmt.Sprintf("%d of %d qualifying nodes over %d of %d domains", c.QualifyingNodes, c.RequiredNodes, c.QualifyingDomains, c.RequiredDomains))
	return outcome{}, false
}

// checkFeasible stops at the first blocking hazard of any stage's answer.
func (s *scope) checkFeasible(answers []placement.Answer, stages []placement.Stage) (outcome, bool) {
	var hazards []placement.Hazard
	seen := map[string]bool{}
	for _, a := range answers {
		for _, h := range a.Hazards {
			if key := h.Type + "/" + h.Workload; !seen[key] {
				seen[key] = true
				hazards = append(hazards, h)
			}
		}
	}
	s.pm.Status.Hazards = hazardsFromAnswer(hazards)
	for _, a := range answers {
		if b := a.FirstBlocking(); b != nil {
			setCondition(s.pm, s.now, pgv1.ConditionFeasible, metav1.ConditionFalse, b.Type, b.Message)
			return outcome{phase: pgv1.PhaseBlocked, reason: b.Type, message: truncate(b.Message, 2048)}, true
		}
	}
	names := make([]string, len(stages))
	for i, st := range stages {
		names[i] = string(st)
	}
	setCondition(s.pm, s.now, pgv1.ConditionFeasible, metav1.ConditionTrue, pgv1.ReasonFeasible,
		fmt.Sprintf("The simulated rollout of the %s stage completes on every target", strings.Join(names, " and ")))
	return outcome{}, false
}

// checkPodsStable waits until every pod of the group is Ready and has run
// without a restart for guards.minPodAge.
func (s *scope) checkPodsStable(group []*target, waiting pgv1.Phase) (outcome, bool) {
	var pods []*corev1.Pod
	for _, t := range group {
		pods = append(pods, t.Pods...)
	}
	why, next := unstable(pods, s.pm.Spec.MinPodAge(), s.now)
	if why == "" {
		setCondition(s.pm, s.now, pgv1.ConditionPodsStable, metav1.ConditionTrue, pgv1.ReasonPodsStable,
			"Every target pod is Ready and has run without a restart for guards.minPodAge")
		return outcome{}, false
	}
	setCondition(s.pm, s.now, pgv1.ConditionPodsStable, metav1.ConditionFalse, pgv1.ReasonWaitingForPods, why)
	o := outcome{phase: waiting, reason: pgv1.ReasonWaitingForPods, message: why}
	if !next.IsZero() {
		o.after = next.Sub(s.now)
	}
	return o, true
}

// plan dry-runs the stage on every target of the group and lists, from
// the engine's answer, the pods it recreates and where a hard spread
// leaves them.
func (s *scope) plan(ctx context.Context, group []*target, stage placement.Stage, answers []placement.Answer) ([]pgv1.TargetPlan, map[string][]string, outcome, bool, error) {
	var plan []pgv1.TargetPlan
	recreated := map[string][]string{}
	for _, t := range group {
		ac, err := workloadpatch.ApplyConfiguration(t.patchTarget(), t.entry(stage))
		if err != nil {
			return nil, nil, outcome{}, false, err
		}
		if err := s.r.Apply(ctx, ac, client.FieldOwner(s.manager), client.DryRunAll); err != nil {
			if o, refused := s.refusal(t.ref, stage, err); refused {
				return nil, nil, o, true, nil
			}
			return nil, nil, outcome{}, false, fmt.Errorf("dry-run the %s stage on %s: %w", stage, t, err)
		}
		from := t.rendered.StageOf(&t.Template().Spec, t.Selector())
		entry := pgv1.TargetPlan{Kind: t.ref.Kind, Name: t.ref.Name, Stage: pgv1.Stage(stage), Change: truncate(t.rendered.Describe(from, stage), 1024)}
		for _, a := range answers {
			if r, ok := a.Rollouts[t.String()]; ok && a.Templates[t.String()] != nil && from != stage && entry.RecreatesCount == 0 {
				entry.RecreatesCount = int32(len(r.Recreates))
				entry.Recreates = r.Recreates[:min(len(r.Recreates), 5)]
				recreated[t.String()] = r.Recreates
			}
			if es, ok := a.EndStates[t.String()]; ok {
				entry.PredictedPlacement = truncate("After the Hard stage, "+es.Summary(), 512)
			}
		}
		plan = append(plan, entry)
	}
	return plan, recreated, outcome{}, false, nil
}

// protectedPods lists the pods guards.protectedPods selects.
func (s *scope) protectedPods(ctx context.Context) ([]*corev1.Pod, error) {
	sel := s.pm.Spec.Protected()
	if sel == nil {
		return nil, nil
	}
	selector, err := metav1.LabelSelectorAsSelector(sel.AsMeta())
	if err != nil {
		return nil, fmt.Errorf("guards.protectedPods: %w", err)
	}
	var list corev1.PodList
	if err := s.r.List(ctx, &list, client.InNamespace(s.pm.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return nil, fmt.Errorf("list protected pods: %w", err)
	}
	var out []*corev1.Pod
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			out = append(out, &list.Items[i])
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// protectedChange compares the live protected pods with their record.
func (s *scope) protectedChange(ctx context.Context) (string, error) {
	if s.pm.Status.ProtectedPods == nil {
		return "", nil
	}
	live, err := s.protectedPods(ctx)
	if err != nil {
		return "", err
	}
	return protectedChanged(s.pm.Status.ProtectedPods, live), nil
}

func recreatesProtected(recreated map[string][]string, protected []*corev1.Pod) string {
	names := map[string]bool{}
	for _, p := range protected {
		names[p.Name] = true
	}
	var hits []string
	for ref, pods := range recreated {
		for _, n := range pods {
			if names[n] {
				hits = append(hits, fmt.Sprintf("%s (of %s)", n, ref))
			}
		}
	}
	sort.Strings(hits)
	return firstFew(hits, 5)
}

func planSummary(stage placement.Stage, plan []pgv1.TargetPlan) string {
	recreated := int32(0)
	for _, e := range plan {
		recreated += e.RecreatesCount
	}
	return fmt.Sprintf("The %s stage would change %d workload(s) and recreate %d pod(s); see status.plan", stage, len(plan), recreated)
}
