package planning

import (
	"fmt"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/brief"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// Stages are the stages a migration applies, in order, up to its final one.
func Stages(final pgv1.Stage) []pgv1.Stage {
	if final == pgv1.StageSoft {
		return []pgv1.Stage{pgv1.StageSoft}
	}
	return []pgv1.Stage{pgv1.StageSoft, pgv1.StageHard}
}

// Ask asks the engine about each stage, against one snapshot, for the
// workloads as they are now.
func Ask(snap *placement.Snapshot, q placement.Question, stages []pgv1.Stage) ([]placement.Answer, error) {
	answers := make([]placement.Answer, 0, len(stages))
	for _, stage := range stages {
		q.Stage = stage
		a, err := snap.Analyze(q)
		if err != nil {
			return nil, fmt.Errorf("analyze the %s stage: %w", stage, err)
		}
		answers = append(answers, a)
	}
	return answers, nil
}

// UniqueHazards lists the findings of all answers, each type once per
// workload, in the order found.
func UniqueHazards(answers []placement.Answer) []placement.Hazard {
	var out []placement.Hazard
	seen := map[string]bool{}
	for _, a := range answers {
		for _, h := range a.Hazards {
			if key := h.Type + "/" + h.Workload.String(); !seen[key] {
				seen[key] = true
				out = append(out, h)
			}
		}
	}
	return out
}

// TargetPlan is what moving the target to the stage changes, from the
// engine's answers: the change to its template, the pods the rollout
// recreates (all of them are returned; the entry lists the first few) and,
// for a hard spread, where the rollout can leave them.
func TargetPlan(t *Target, stage pgv1.Stage, answers []placement.Answer) (pgv1.TargetPlan, []string) {
	key := t.Ref
	from := t.Rendered.StageOf(&t.Template().Spec, t.Selector())
	entry := pgv1.TargetPlan{Kind: t.Ref.Kind, Name: t.Ref.Name, Stage: stage, Change: brief.Truncate(t.Rendered.Describe(from, stage), MaxChange)}
	var recreated []string
	for _, a := range answers {
		if r, ok := a.Rollouts[key]; ok && a.Templates[key] != nil && from != stage && entry.RecreatesCount == 0 {
			entry.RecreatesCount = int32(len(r.Recreates))
			entry.Recreates = r.Recreates[:min(len(r.Recreates), MaxListedRecreate)]
			recreated = r.Recreates
		}
		if name, ok := a.Profiles[key]; ok && entry.SchedulerProfile == "" {
			entry.SchedulerProfile = name
		}
		if es, ok := a.EndStates[key]; ok {
			entry.PredictedPlacement = brief.Truncate("After the Hard stage, "+es.Summary(), MaxPlacement)
		}
	}
	return entry, recreated
}
