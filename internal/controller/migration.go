package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/metrics"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/workloadpatch"
)

// maxDriftCorrections is how often a constraint removed by another writer
// is re-applied before the migration stalls and asks a person.
const maxDriftCorrections = 3

// migration is one reconcile of one PlacementMigration: what was read, and
// the decisions taken from it.
type migration struct {
	r          *PlacementMigrationReconciler
	pm         *pgv1.PlacementMigration
	now        time.Time
	targets    []*target
	constraint placement.Constraint
}

// step decides and performs the next step of the state machine. Where the
// migration stands is read from the targets themselves (which stage their
// templates carry) and from the stage records in status, so a reconcile
// after a pause, a restart of the operator or a stale read continues where
// the work really is.
func (m *migration) step(ctx context.Context) (outcome, error) {
	pm := m.pm
	newGeneration := pm.Status.ObservedGeneration != pm.Generation
	if newGeneration {
		pm.Status.DriftCorrections = 0
	}
	if !newGeneration && (pm.Status.Phase == pgv1.PhaseRolledBack || pm.Status.Phase == pgv1.PhaseFailed) {
		return m.hold(), nil
	}
	m.constraint = constraintFromSpec(pm.Spec.Constraint)
	ts, missing, err := m.r.loadTargets(ctx, pm)
	if err != nil {
		return outcome{}, err
	}
	if len(missing) > 0 {
		return outcome{phase: pgv1.PhaseBlocked, reason: pgv1.ReasonTargetNotFound,
			message: fmt.Sprintf("%s not found in namespace %s; create it or correct spec.targets", strings.Join(missing, ", "), pm.Namespace)}, nil
	}
	if len(ts) == 0 {
		return outcome{phase: pgv1.PhaseBlocked, reason: pgv1.ReasonNoTargets,
			message: fmt.Sprintf("spec.targetSelector selects no workload in namespace %s; label the workloads or correct the selector", pm.Namespace)}, nil
	}
	m.targets = ts
	m.recordTargets()
	if pm.Spec.Paused {
		return outcome{phase: pgv1.PhasePaused, reason: pgv1.ReasonPaused,
			message: fmt.Sprintf("Paused with the %s stage applied; nothing is patched until spec.paused is false", pm.Status.Stage)}, nil
	}

	final := placement.Stage(pm.Spec.FinalStage)
	observed := m.observedStage()
	last := m.lastRecord()
	switch {
	case pm.Status.Phase == pgv1.PhaseSucceeded && !newGeneration:
		return m.watchDrift(ctx, final)
	case last != nil && last.CompletedAt == nil && observed == placement.Stage(last.Stage):
		return m.rollingOut(ctx, last)
	case last != nil && last.CompletedAt == nil && m.cacheBehind():
		// The cache has not yet seen our last apply; act on nothing older.
		o := m.hold()
		o.after = time.Second
		return o, nil
	case last != nil && last.CompletedAt != nil && observed == placement.Stage(last.Stage) && observed == placement.StageSoft:
		return m.soaking(ctx, last, final)
	case last != nil && last.CompletedAt != nil && observed == final:
		return m.succeed(final), nil
	}
	return m.advance(ctx, next(observed))
}

// rendered is the constraint as written into target t: a Deployment's
// spread counts only the new revision unless the spec says otherwise.
func (m *migration) rendered(t *target) placement.Constraint {
	all := make([]*placement.Workload, len(m.targets))
	for i, o := range m.targets {
		all[i] = o.workload
	}
	return m.constraint.RenderFor(t.workload, all)
}

// appliedEntry is the entry the stage writes into t's template, as written.
func (m *migration) appliedEntry(t *target, stage placement.Stage) *pgv1.PlacementSnapshot {
	if stage == placement.StageNone {
		return nil
	}
	spec, err := m.rendered(t).Apply(&corev1.PodSpec{}, t.selector(), stage)
	if err != nil {
		return nil
	}
	snap := &pgv1.PlacementSnapshot{TopologySpreadConstraints: spec.TopologySpreadConstraints}
	if spec.Affinity != nil {
		snap.PodAntiAffinity = spec.Affinity.PodAntiAffinity
	}
	return snap
}

// next is the stage after the one the targets carry.
func next(observed placement.Stage) placement.Stage {
	if observed == placement.StageNone {
		return placement.StageSoft
	}
	return placement.StageHard
}

// hold keeps a migration that waits for a person as it is.
func (m *migration) hold() outcome {
	o := outcome{phase: m.pm.Status.Phase}
	if c := meta.FindStatusCondition(m.pm.Status.Conditions, pgv1.ConditionReady); c != nil {
		o.reason, o.message = c.Reason, c.Message
	}
	return o
}

// advance takes the checks that come before every stage, in order:
// capacity, feasibility of this stage and of the final one, stable pods,
// the server-side dry run and the protected pods; then applies the stage.
func (m *migration) advance(ctx context.Context, stage placement.Stage) (outcome, error) {
	pm := m.pm
	final := placement.Stage(pm.Spec.FinalStage)
	waiting := pgv1.PhasePending
	if stage == placement.StageHard {
		waiting = pgv1.PhaseSoaking
	}
	stages := []placement.Stage{stage}
	if stage != final {
		stages = append(stages, final)
	}
	answers, err := m.analyze(stages)
	if err != nil {
		return outcome{}, err
	}
	capacity := answers[0].Capacity
	m.recordCapacity(capacity)
	if !capacity.Enough() {
		msg := fmt.Sprintf("%s; waiting for them before the %s stage, nothing has been changed", capacity.Shortfall(m.constraint.TopologyKey()), stage)
		if stage == placement.StageHard {
			msg = fmt.Sprintf("%s; the Soft stage stays applied until they exist", capacity.Shortfall(m.constraint.TopologyKey()))
		}
		m.setCondition(pgv1.ConditionCapacityAvailable, metav1.ConditionFalse, pgv1.ReasonInsufficientCapacity, msg)
		meta.RemoveStatusCondition(&pm.Status.Conditions, pgv1.ConditionFeasible)
		pm.Status.Hazards = nil
		return outcome{phase: pgv1.PhaseWaitingForCapacity, reason: pgv1.ReasonWaitingForCapacity, message: msg}, nil
	}
	m.setCondition(pgv1.ConditionCapacityAvailable, metav1.ConditionTrue, pgv1.ReasonCapacityFound,
		fmt.Sprintf("%d of %d qualifying nodes over %d of %d domains", capacity.QualifyingNodes, capacity.RequiredNodes, capacity.QualifyingDomains, capacity.RequiredDomains))

	hazards := mergeHazards(answers)
	pm.Status.Hazards = hazardsFromAnswer(hazards)
	if len(pm.Status.Hazards) > 32 {
		pm.Status.Hazards = pm.Status.Hazards[:32]
	}
	if blocking := firstBlocking(hazards); blocking != nil {
		m.setCondition(pgv1.ConditionFeasible, metav1.ConditionFalse, blocking.Type, blocking.Message)
		return outcome{phase: pgv1.PhaseBlocked, reason: blocking.Type, message: truncate(blocking.Message, 2048)}, nil
	}
	m.setCondition(pgv1.ConditionFeasible, metav1.ConditionTrue, pgv1.ReasonFeasible,
		fmt.Sprintf("The simulated rollout of the %s completes on every target", stageList(stages)))

	if why, wait := unstable(m.targets, lastRecorded(pm), pm.Spec.Guards.MinPodAge.Duration, m.now); why != "" {
		m.setCondition(pgv1.ConditionPodsStable, metav1.ConditionFalse, pgv1.ReasonWaitingForPods, why)
		return outcome{phase: waiting, reason: pgv1.ReasonWaitingForPods, message: why, after: wait + time.Second}, nil
	}
	m.setCondition(pgv1.ConditionPodsStable, metav1.ConditionTrue, pgv1.ReasonPodsStable, "Every target pod is Ready, old enough and has not restarted")

	plan, blocked, err := m.plan(ctx, stage, answers)
	if err != nil || blocked != nil {
		return deref(blocked), err
	}
	pm.Status.Plan = plan
	protected, err := m.r.protectedPods(ctx, pm)
	if err != nil {
		return outcome{}, err
	}
	if hit := recreatesProtected(plan, protected); hit != "" {
		msg := fmt.Sprintf("The %s stage would recreate protected pod(s) %s; remove the workload from the targets or the pods from guards.protectedPods", stage, hit)
		return outcome{phase: pgv1.PhaseBlocked, reason: pgv1.ReasonProtectedPodChanged, message: msg}, nil
	}
	if pm.Spec.DryRun {
		return outcome{phase: pgv1.PhasePlanned, reason: pgv1.ReasonPlanned, message: planSummary(stage, plan) + "; dry run, nothing was changed"}, nil
	}
	return m.start(ctx, stage, protected)
}

// start applies a stage to every target and records it.
func (m *migration) start(ctx context.Context, stage placement.Stage, protected []*corev1.Pod) (outcome, error) {
	pm := m.pm
	for _, t := range m.targets {
		if err := m.apply(ctx, t, pgv1.Stage(stage), false); err != nil {
			if o, ok := applyRefused(t, stage, err); ok {
				return o, nil
			}
			return outcome{}, err
		}
	}
	started := metav1.NewTime(m.now)
	for _, t := range m.targets {
		ts := m.targetStatus(t)
		ts.Stage = pgv1.Stage(stage)
		ts.Applied = m.appliedEntry(t, stage)
		ts.AppliedGeneration = t.object().GetGeneration()
		ts.Stages = appendRecord(ts.Stages, pgv1.StageRecord{Stage: pgv1.Stage(stage), StartedAt: &started, PodsBefore: observeAll(t.pods)})
	}
	pm.Status.Stage = pgv1.Stage(stage)
	pm.Status.ProtectedPods = observeAll(protected)
	pm.Status.Plan = nil
	m.setCondition(stageCondition(stage), metav1.ConditionFalse, pgv1.ReasonRolloutInProgress, fmt.Sprintf("The %s stage was applied; waiting for the rollout", stage))
	return outcome{
		phase: applyingPhase(stage), reason: pgv1.ReasonStageApplied,
		message: fmt.Sprintf("Applied the %s stage to %s; waiting for the rollout", stage, targetNames(m.targets)),
		after:   pm.Spec.StageTimeout.Duration,
	}, nil
}

// rollingOut watches a stage's rollout: it rolls back on the first sign
// that the stage hurts, and completes it once every target has rolled out
// and the placement holds.
func (m *migration) rollingOut(ctx context.Context, last *pgv1.StageRecord) (outcome, error) {
	pm := m.pm
	stage := placement.Stage(last.Stage)
	deadline := last.StartedAt.Add(pm.Spec.StageTimeout.Duration)
	if o, rolledBack, err := m.rollbackIfHurt(ctx, stage, podsBefore); rolledBack || err != nil {
		return o, err
	}
	for _, t := range m.targets {
		if progressDeadlineExceeded(t) {
			return m.rollback(ctx, stage, pgv1.ReasonProgressDeadline, fmt.Sprintf("%s reports ProgressDeadlineExceeded", t))
		}
	}
	grace := m.r.UnschedulableGrace
	if why, waited := unschedulableByConstraint(m.targets, m.constraint, m.now); why != "" && waited >= grace {
		return m.rollback(ctx, stage, pgv1.ReasonPodsUnschedulable, fmt.Sprintf("%s (for %s)", why, waited.Round(time.Second)))
	}
	if !m.now.Before(deadline) {
		return m.rollback(ctx, stage, pgv1.ReasonStageTimedOut, fmt.Sprintf("the %s stage did not complete within stageTimeout %s", stage, pm.Spec.StageTimeout.Duration))
	}
	after := deadline.Sub(m.now)
	for _, t := range m.targets {
		if done, why := rolledOut(t, m.targetStatus(t).AppliedGeneration); !done {
			return outcome{phase: applyingPhase(stage), reason: pgv1.ReasonRolloutInProgress, message: why, after: min(after, grace)}, nil
		}
	}
	summaries, holds, err := m.measure()
	if err != nil {
		return outcome{}, err
	}
	if stage == placement.StageHard && !holds {
		return outcome{phase: pgv1.PhaseVerifying, reason: pgv1.ReasonRolloutInProgress,
			message: "Rolled out, but the placement does not yet hold: " + summaries, after: after}, nil
	}
	completed := metav1.NewTime(m.now)
	for _, t := range m.targets {
		ts := m.targetStatus(t)
		rec := &ts.Stages[len(ts.Stages)-1]
		rec.CompletedAt = &completed
		rec.PodsAfter = observeAll(t.pods)
	}
	metrics.ObserveStage(string(stage), "verified", m.now.Sub(last.StartedAt.Time))
	m.setCondition(stageCondition(stage), metav1.ConditionTrue, pgv1.ReasonStageVerified, fmt.Sprintf("The %s stage rolled out and was verified: %s", stage, summaries))
	if stage == placement.StageSoft {
		return m.soaking(ctx, m.lastRecord(), placement.Stage(pm.Spec.FinalStage))
	}
	return m.succeed(stage), nil
}

// soaking holds the soft stage for soakDuration, watching the guards, then
// moves on to the hard stage (or ends, for finalStage Soft).
func (m *migration) soaking(ctx context.Context, last *pgv1.StageRecord, final placement.Stage) (outcome, error) {
	if o, rolledBack, err := m.rollbackIfHurt(ctx, placement.StageSoft, podsAfter); rolledBack || err != nil {
		return o, err
	}
	until := last.CompletedAt.Add(m.pm.Spec.SoakDuration.Duration)
	if m.now.Before(until) {
		next := "the Hard stage"
		if final == placement.StageSoft {
			next = "success"
		}
		return outcome{phase: pgv1.PhaseSoaking, reason: pgv1.ReasonSoaking,
			message: fmt.Sprintf("The Soft stage holds; soaking until %s before %s", until.UTC().Format(time.RFC3339), next),
			after:   until.Sub(m.now)}, nil
	}
	if final == placement.StageSoft {
		return m.succeed(final), nil
	}
	return m.advance(ctx, placement.StageHard)
}

// succeed records the end of the migration.
func (m *migration) succeed(final placement.Stage) outcome {
	m.setCondition(pgv1.ConditionConstraintInSync, metav1.ConditionTrue, pgv1.ReasonInSync, fmt.Sprintf("Every target carries the %s constraint", final))
	m.pm.Status.Plan = nil
	return outcome{phase: pgv1.PhaseSucceeded, reason: pgv1.ReasonSucceeded,
		message: fmt.Sprintf("The %s stage is applied and verified on %s", final, targetNames(m.targets))}
}

// rollbackIfHurt rolls the stage back when a protected pod was recreated or
// a target pod restarted more than guards.maxRestarts since the stage's
// record (PodsBefore while rolling out, PodsAfter while soaking).
func (m *migration) rollbackIfHurt(ctx context.Context, stage placement.Stage, since podsField) (outcome, bool, error) {
	live, err := m.r.protectedPods(ctx, m.pm)
	if err != nil {
		return outcome{}, false, err
	}
	if changed := protectedChanged(m.pm.Status.ProtectedPods, live); changed != "" {
		o, err := m.rollback(ctx, stage, pgv1.ReasonProtectedPodChanged, "protected pod "+changed)
		return o, true, err
	}
	limit := m.pm.Spec.Guards.MaxRestarts
	for _, t := range m.targets {
		ts := m.targetStatus(t)
		recorded := map[string]int32{}
		if n := len(ts.Stages); n > 0 {
			for _, o := range since(&ts.Stages[n-1]) {
				recorded[o.UID] = o.Restarts
			}
		}
		for _, p := range t.pods {
			if added := restarts(p) - recorded[string(p.UID)]; added > limit {
				o, err := m.rollback(ctx, stage, pgv1.ReasonPodsRestarted,
					fmt.Sprintf("%s: pod %s restarted %d time(s) during the stage, more than guards.maxRestarts %d", t, p.Name, added, limit))
				return o, true, err
			}
		}
	}
	return outcome{}, false, nil
}

// podsField picks which pods of a stage record a guard compares with.
type podsField func(*pgv1.StageRecord) []pgv1.PodObservation

func podsBefore(r *pgv1.StageRecord) []pgv1.PodObservation { return r.PodsBefore }
func podsAfter(r *pgv1.StageRecord) []pgv1.PodObservation  { return r.PodsAfter }

// rollback restores what the targets carried before the stage, with the
// same field manager, and stalls the migration with the cause.
func (m *migration) rollback(ctx context.Context, stage placement.Stage, reason, cause string) (outcome, error) {
	previous := placement.StageNone
	if stage == placement.StageHard {
		previous = placement.StageSoft
	}
	for _, t := range m.targets {
		if err := m.apply(ctx, t, pgv1.Stage(previous), false); err != nil {
			return outcome{}, fmt.Errorf("roll %s back to %s: %w", t, previous, err)
		}
		m.targetStatus(t).Stage = pgv1.Stage(previous)
		m.targetStatus(t).Applied = m.appliedEntry(t, previous)
	}
	m.pm.Status.Stage = pgv1.Stage(previous)
	if last := m.lastRecord(); last != nil && last.StartedAt != nil {
		metrics.ObserveStage(string(stage), "rolledBack", m.now.Sub(last.StartedAt.Time))
	}
	metrics.CountRollback(reason)
	m.setCondition(stageCondition(stage), metav1.ConditionFalse, pgv1.ReasonRolledBack, "Rolled back: "+cause)
	restored := "the constraints found before the migration"
	if previous == placement.StageSoft {
		restored = "the Soft stage"
	}
	return outcome{phase: pgv1.PhaseRolledBack, reason: reason,
		message: fmt.Sprintf("Rolled the %s stage back to %s: %s. Fix the cause, then change the spec (for example stageTimeout) to try again", stage, restored, cause)}, nil
}

// watchDrift keeps a succeeded migration's constraint in place: a writer
// that removes or changes it is named, and the constraint re-applied with
// backoff, at most three times.
func (m *migration) watchDrift(ctx context.Context, final placement.Stage) (outcome, error) {
	pm := m.pm
	var drifted []*target
	for _, t := range m.targets {
		if m.rendered(t).StageOf(&t.template().Spec, t.selector()) != final {
			drifted = append(drifted, t)
		}
	}
	if len(drifted) == 0 {
		if c := meta.FindStatusCondition(pm.Status.Conditions, pgv1.ConditionConstraintInSync); c == nil || c.Status != metav1.ConditionTrue {
			m.setCondition(pgv1.ConditionConstraintInSync, metav1.ConditionTrue, pgv1.ReasonInSync, fmt.Sprintf("Every target carries the %s constraint", final))
		}
		return m.hold(), nil
	}
	writer, err := m.r.lastWriter(ctx, drifted[0])
	if err != nil {
		return outcome{}, err
	}
	what := fmt.Sprintf("%s no longer carries the %s constraint; last changed by field manager %q", drifted[0], final, writer)
	if pm.Status.DriftCorrections >= maxDriftCorrections {
		msg := fmt.Sprintf("%s, after %d re-applies. Commit the constraint where %s is defined (its chart or Git source) so that %q stops removing it", what, pm.Status.DriftCorrections, drifted[0], writer)
		m.setCondition(pgv1.ConditionConstraintInSync, metav1.ConditionFalse, pgv1.ReasonDriftRetriesExceeded, msg)
		return outcome{phase: pgv1.PhaseFailed, reason: pgv1.ReasonDriftRetriesExceeded, message: msg}, nil
	}
	backoff := 5 * time.Second << pm.Status.DriftCorrections
	if c := meta.FindStatusCondition(pm.Status.Conditions, pgv1.ConditionConstraintInSync); c != nil && c.Status == metav1.ConditionFalse {
		if wait := c.LastTransitionTime.Add(backoff).Sub(m.now); wait > 0 {
			o := m.hold()
			o.after = wait
			return o, nil
		}
	} else {
		m.setCondition(pgv1.ConditionConstraintInSync, metav1.ConditionFalse, pgv1.ReasonDrifted, what+"; re-applying after "+backoff.String())
		o := m.hold()
		o.after = backoff
		o.events = []note{{kind: corev1.EventTypeWarning, reason: pgv1.ReasonDrifted, message: what}}
		return o, nil
	}
	for _, t := range drifted {
		if err := m.apply(ctx, t, pgv1.Stage(final), false); err != nil {
			if o, ok := applyRefused(t, final, err); ok {
				return o, nil
			}
			return outcome{}, err
		}
	}
	pm.Status.DriftCorrections++
	msg := fmt.Sprintf("%s; re-applied (%d of %d)", what, pm.Status.DriftCorrections, maxDriftCorrections)
	m.setCondition(pgv1.ConditionConstraintInSync, metav1.ConditionFalse, pgv1.ReasonDrifted, msg)
	o := m.hold()
	o.events = []note{{kind: corev1.EventTypeWarning, reason: pgv1.ReasonDrifted, message: msg}}
	return o, nil
}

// analyze asks the engine about each stage, against the same snapshot.
func (m *migration) analyze(stages []placement.Stage) ([]placement.Answer, error) {
	workloads := make([]*placement.Workload, len(m.targets))
	for i, t := range m.targets {
		workloads[i] = t.workload
	}
	capacity := placement.CapacitySpec{NodeSelector: m.pm.Spec.Capacity.NodeSelector, MinNodes: m.pm.Spec.Capacity.MinNodes, MinDomains: m.pm.Spec.Capacity.MinDomains}
	answers := make([]placement.Answer, 0, len(stages))
	err := m.r.State.With(func(s *placement.Snapshot) error {
		for _, stage := range stages {
			a, err := s.Analyze(placement.Question{Workloads: workloads, Constraint: m.constraint, Stage: stage, Capacity: capacity})
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

// measure judges the targets' actual placement.
func (m *migration) measure() (string, bool, error) {
	var summaries []string
	holds := true
	err := m.r.State.With(func(s *placement.Snapshot) error {
		for _, t := range m.targets {
			got, err := s.Measure(t.workload, m.rendered(t))
			if err != nil {
				return err
			}
			holds = holds && got.Holds
			summaries = append(summaries, got.Summary)
		}
		return nil
	})
	return strings.Join(summaries, "; "), holds, err
}

// plan dry-runs the stage on every target and lists the pods it recreates
// and, for a hard spread, where the rollout can leave them.
func (m *migration) plan(ctx context.Context, stage placement.Stage, answers []placement.Answer) ([]pgv1.TargetPlan, *outcome, error) {
	var plan []pgv1.TargetPlan
	for _, t := range m.targets {
		if err := m.apply(ctx, t, pgv1.Stage(stage), true); err != nil {
			if o, ok := applyRefused(t, stage, err); ok {
				return nil, &o, nil
			}
			return nil, nil, err
		}
		from := m.rendered(t).StageOf(&t.template().Spec, t.selector())
		entry := pgv1.TargetPlan{Kind: t.ref.Kind, Name: t.ref.Name, Stage: pgv1.Stage(stage), Change: truncate(m.rendered(t).Describe(from, stage), 2048)}
		if from != stage {
			var names []string
			for _, p := range recreatedBy(t) {
				names = append(names, p.Name)
			}
			entry.RecreatesCount = int32(len(names))
			if len(names) > 64 {
				names = names[:64]
			}
			entry.Recreates = names
		}
		for _, a := range answers {
			if es, ok := a.EndStates[t.String()]; ok {
				entry.PredictedPlacement = truncate("After the Hard stage, "+es.Summary(), 1024)
			}
		}
		plan = append(plan, entry)
	}
	return plan, nil, nil
}

// recreatedBy lists the pods a template change recreates: every pod of a
// Deployment or of a rolling StatefulSet at or above its partition, none of
// an OnDelete StatefulSet until someone deletes them.
func recreatedBy(t *target) []*corev1.Pod {
	s := t.statefulSet
	if s == nil {
		return t.pods
	}
	if s.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return nil
	}
	partition := int32(0)
	if ru := s.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		partition = *ru.Partition
	}
	var out []*corev1.Pod
	for _, p := range t.pods {
		var ordinal int32
		if _, err := fmt.Sscanf(strings.TrimPrefix(p.Name, s.Name+"-"), "%d", &ordinal); err == nil && ordinal >= partition {
			out = append(out, p)
		}
	}
	return out
}

// apply writes the constraint at stage into a target with server-side
// apply, or dry-runs it. It never forces: a field another manager owns is
// a conflict the caller reports.
func (m *migration) apply(ctx context.Context, t *target, stage pgv1.Stage, dryRun bool) error {
	wt := workloadpatch.Target{Kind: t.workload.Kind, Namespace: t.workload.Namespace, Name: t.workload.Name, Selector: t.selector()}
	var ac runtime.ApplyConfiguration
	var err error
	if t.deployment != nil {
		ac, err = workloadpatch.Deployment(wt, m.rendered(t), placement.Stage(stage))
	} else {
		ac, err = workloadpatch.StatefulSet(wt, m.rendered(t), placement.Stage(stage))
	}
	if err != nil {
		return err
	}
	opts := []client.ApplyOption{client.FieldOwner(FieldManager)}
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	if err := m.r.Apply(ctx, ac, opts...); err != nil {
		return fmt.Errorf("apply %s stage to %s: %w", stage, t, err)
	}
	if !dryRun {
		// Read the new generation back from the answer: the rollout of
		// that generation is what the stage waits for.
		var answer struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if raw, err := json.Marshal(ac); err == nil && json.Unmarshal(raw, &answer) == nil && answer.Metadata.Generation > 0 {
			t.object().SetGeneration(answer.Metadata.Generation)
		}
	}
	return nil
}

// applyRefused turns an apply the API server refused for good into a
// Blocked outcome: a field owned by another manager, or a change the
// server rejects. Anything else is retried.
func applyRefused(t *target, stage placement.Stage, err error) (outcome, bool) {
	if c, ok := workloadpatch.AsConflict(err); ok {
		return outcome{phase: pgv1.PhaseBlocked, reason: pgv1.ReasonFieldConflict, message: fmt.Sprintf(
			"%s: the %s stage would change %s, owned by field manager %s; placement-guard never takes fields over. Remove them where %s is defined, or let that manager apply the constraint",
			t, stage, strings.Join(c.Fields, ", "), quoteAll(c.Managers), t)}, true
	}
	if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) {
		return outcome{phase: pgv1.PhaseBlocked, reason: pgv1.ReasonApplyFailed, message: truncate(err.Error(), 2048)}, true
	}
	return outcome{}, false
}

// lastWriter names the field manager that changed the workload last, from
// its managed fields, which the cache does not keep. Managed fields carry
// times to the second only, so among writers of the same second the one
// that now owns placement fields of the pod template is taken: that is who
// replaced ours.
func (r *PlacementMigrationReconciler) lastWriter(ctx context.Context, t *target) (string, error) {
	obj := t.object().DeepCopyObject().(client.Object)
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return "", fmt.Errorf("read managed fields of %s: %w", t, err)
	}
	writer, newest, placementOwner := "unknown", time.Time{}, false
	for _, mf := range obj.GetManagedFields() {
		if mf.Manager == FieldManager || mf.Subresource != "" || mf.Time == nil {
			continue
		}
		owns := ownsPlacementFields(mf)
		if mf.Time.Time.After(newest) || (mf.Time.Time.Equal(newest) && owns && !placementOwner) {
			writer, newest, placementOwner = mf.Manager, mf.Time.Time, owns
		}
	}
	return writer, nil
}

// ownsPlacementFields reports whether a managed fields entry holds pod
// anti-affinity or spread constraints.
func ownsPlacementFields(mf metav1.ManagedFieldsEntry) bool {
	if mf.FieldsV1 == nil {
		return false
	}
	raw := string(mf.FieldsV1.Raw)
	return strings.Contains(raw, `"f:podAntiAffinity"`) || strings.Contains(raw, `"f:topologySpreadConstraints"`)
}

// recordTargets keeps one status entry per target, recording what its
// template carried the first time the migration saw it.
func (m *migration) recordTargets() {
	for _, t := range m.targets {
		ts := m.targetStatus(t)
		if ts.Before == nil {
			spec := &t.template().Spec
			snap := &pgv1.PlacementSnapshot{TopologySpreadConstraints: spec.TopologySpreadConstraints}
			if spec.Affinity != nil && spec.Affinity.PodAntiAffinity != nil {
				snap.PodAntiAffinity = spec.Affinity.PodAntiAffinity.DeepCopy()
			}
			ts.Before = snap
		}
		ts.Stage = pgv1.Stage(m.rendered(t).StageOf(&t.template().Spec, t.selector()))
	}
	if m.pm.Status.Stage == "" {
		m.pm.Status.Stage = pgv1.StageNone
	}
}

// targetStatus returns the status entry of a target, adding it if needed.
func (m *migration) targetStatus(t *target) *pgv1.TargetStatus {
	for i := range m.pm.Status.Targets {
		ts := &m.pm.Status.Targets[i]
		if ts.Kind == t.ref.Kind && ts.Name == t.ref.Name {
			return ts
		}
	}
	m.pm.Status.Targets = append(m.pm.Status.Targets, pgv1.TargetStatus{Kind: t.ref.Kind, Name: t.ref.Name, Stage: pgv1.StageNone})
	return &m.pm.Status.Targets[len(m.pm.Status.Targets)-1]
}

// cacheBehind reports whether a target read from the cache is older than
// the generation our last apply produced.
func (m *migration) cacheBehind() bool {
	for _, t := range m.targets {
		if t.object().GetGeneration() < m.targetStatus(t).AppliedGeneration {
			return true
		}
	}
	return false
}

// observedStage is the weakest stage any target's live template carries.
func (m *migration) observedStage() placement.Stage {
	weakest := placement.StageHard
	for _, t := range m.targets {
		switch m.rendered(t).StageOf(&t.template().Spec, t.selector()) {
		case placement.StageNone:
			return placement.StageNone
		case placement.StageSoft:
			weakest = placement.StageSoft
		}
	}
	return weakest
}

// lastRecord is the most recent stage record; stages are applied to every
// target together, so the first target's history is the migration's.
func (m *migration) lastRecord() *pgv1.StageRecord {
	if len(m.targets) == 0 {
		return nil
	}
	ts := m.targetStatus(m.targets[0])
	if len(ts.Stages) == 0 {
		return nil
	}
	return &ts.Stages[len(ts.Stages)-1]
}

func (m *migration) recordCapacity(c placement.Capacity) {
	nodes := c.Nodes
	if len(nodes) > 10 {
		nodes = nodes[:10]
	}
	m.pm.Status.Capacity = &pgv1.CapacityStatus{
		QualifyingNodes: int32(c.QualifyingNodes), RequiredNodes: int32(c.RequiredNodes),
		QualifyingDomains: int32(c.QualifyingDomains), RequiredDomains: int32(c.RequiredDomains),
		Nodes: nodes, Summary: c.Summary(),
	}
}

func (m *migration) setCondition(t string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&m.pm.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: truncate(msg, 32768), ObservedGeneration: m.pm.Generation,
		LastTransitionTime: metav1.NewTime(m.now)})
}

// appendRecord keeps the newest stage records within the API's bound.
func appendRecord(records []pgv1.StageRecord, r pgv1.StageRecord) []pgv1.StageRecord {
	records = append(records, r)
	if len(records) > 8 {
		records = records[len(records)-8:]
	}
	return records
}

func mergeHazards(answers []placement.Answer) []placement.Hazard {
	seen := map[string]bool{}
	var out []placement.Hazard
	for _, a := range answers {
		for _, h := range a.Hazards {
			key := h.Type + "/" + h.Workload
			if !seen[key] {
				seen[key] = true
				out = append(out, h)
			}
		}
	}
	return out
}

func firstBlocking(hs []placement.Hazard) *placement.Hazard {
	for i := range hs {
		if hs[i].Blocking {
			return &hs[i]
		}
	}
	return nil
}

func recreatesProtected(plan []pgv1.TargetPlan, protected []*corev1.Pod) string {
	names := map[string]bool{}
	for _, p := range protected {
		names[p.Name] = true
	}
	var hits []string
	for _, e := range plan {
		for _, n := range e.Recreates {
			if names[n] {
				hits = append(hits, fmt.Sprintf("%s (of %s/%s)", n, e.Kind, e.Name))
			}
		}
	}
	sort.Strings(hits)
	return strings.Join(hits, ", ")
}

func planSummary(stage placement.Stage, plan []pgv1.TargetPlan) string {
	recreated := int32(0)
	for _, e := range plan {
		recreated += e.RecreatesCount
	}
	return fmt.Sprintf("The %s stage would change %d workload(s) and recreate %d pod(s); see status.plan", stage, len(plan), recreated)
}

func stageList(stages []placement.Stage) string {
	parts := make([]string, len(stages))
	for i, s := range stages {
		parts[i] = string(s)
	}
	return strings.Join(parts, " and ") + " stage"
}

func targetNames(ts []*target) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.String()
	}
	return firstFew(names, 5)
}

func quoteAll(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

func applyingPhase(stage placement.Stage) pgv1.Phase {
	if stage == placement.StageHard {
		return pgv1.PhaseApplyingHard
	}
	return pgv1.PhaseApplyingSoft
}

func stageCondition(stage placement.Stage) string {
	if stage == placement.StageHard {
		return pgv1.ConditionHardApplied
	}
	return pgv1.ConditionSoftApplied
}

func deref(o *outcome) outcome {
	if o == nil {
		return outcome{}
	}
	return *o
}
