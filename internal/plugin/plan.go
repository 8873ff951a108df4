package plugin

import (
	"time"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// Report is the plan of a migration: per stage, the capacity found and
// needed, the hazards and, per target, the pods its rollout recreates and
// where each new pod would land.
type Report struct {
	Migration  string `json:"migration,omitempty"`
	Namespace  string `json:"namespace"`
	Constraint string `json:"constraint"`
	// SchedulerProfile is the kube-scheduler profile the plan predicted
	// every target's pods with; "" when they name different profiles, each
	// target's entry naming its own.
	SchedulerProfile string        `json:"schedulerProfile"`
	Missing          []string      `json:"missingTargets,omitempty"`
	Stages           []StageReport `json:"stages"`
	// Moves are the moves spec.rebalance.mode Evict would make now, and
	// MovesNote why the list ends; empty for other modes.
	Moves     []MoveReport `json:"moves,omitempty"`
	MovesNote []string     `json:"movesNote,omitempty"`
	// Costs are the deletion costs spec.rebalance (DeletionCost, Evict)
	// would keep on the pods as they stand now; nil for mode Off.
	Costs *CostsReport `json:"deletionCosts,omitempty"`
	// Verdict is what the operator decides before the migration's next
	// stage (the first, unless its status records a stage verified), from
	// the same question.
	Verdict *VerdictReport `json:"verdict,omitempty"`
	// Reached is the final stage once its status records it verified on
	// every target: there is no next stage to decide about.
	Reached pgv1.Stage `json:"reached,omitempty"`
}

// VerdictReport is the operator's decision before a stage and what it
// records with it.
type VerdictReport struct {
	Stage pgv1.Stage `json:"stage"`
	// Outcome is Proceeds, WaitingForCapacity or Blocked; Reason and
	// Message are the condition's.
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Hazards and Plan are what status.hazards and status.plan record.
	Hazards []pgv1.Hazard     `json:"hazards,omitempty"`
	Plan    []pgv1.TargetPlan `json:"plan,omitempty"`
	// Request is the capacity the operator would ask its autoscaler for
	// (spec.capacity.provision), sized as it sizes it.
	Request *RequestReport `json:"capacityRequest,omitempty"`
}

// RequestReport is a capacity request: placeholders for the nodes the
// final stage lacks, bounded by maxNodes.
type RequestReport struct {
	Mode pgv1.ProvisionMode `json:"mode"`
	// Placeholders are the pods asked for, Nodes the new nodes they need.
	Placeholders int `json:"placeholders"`
	Nodes        int `json:"nodes"`
	// Shortfall is how many nodes the final stage lacks; MaxNodes is set
	// when spec.capacity.provision.maxNodes cut the request short of it.
	Shortfall int    `json:"shortfall"`
	MaxNodes  int    `json:"maxNodes,omitempty"`
	Why       string `json:"why"`
}

// StageReport is the engine's answer for one stage.
type StageReport struct {
	Stage    pgv1.Stage     `json:"stage"`
	Capacity CapacityReport `json:"capacity"`
	// Feasible is true when no hazard blocks the stage.
	Feasible bool           `json:"feasible"`
	Hazards  []pgv1.Hazard  `json:"hazards,omitempty"`
	Targets  []TargetReport `json:"targets,omitempty"`
}

// CapacityReport is what the cluster offers against what the stage needs.
type CapacityReport struct {
	// Summary is found/needed of whichever of nodes and domains is scarcer,
	// as the operator's Capacity condition says it.
	Summary           string `json:"summary"`
	QualifyingNodes   int    `json:"qualifyingNodes"`
	RequiredNodes     int    `json:"requiredNodes"`
	QualifyingDomains int    `json:"qualifyingDomains"`
	RequiredDomains   int    `json:"requiredDomains"`
	Selector          string `json:"nodeSelector,omitempty"`
}

// TargetReport is the plan of one target at one stage: the operator's plan
// entry, with every recreated pod and the simulated rollout step by step.
type TargetReport struct {
	pgv1.TargetPlan
	// Completes is true when the simulated rollout places every new pod.
	Completes bool `json:"completes"`
	// Blocked is the scheduler's message for the pod the rollout stops at.
	Blocked string `json:"blocked,omitempty"`
	Note    string `json:"note,omitempty"`
	Steps   []Step `json:"steps,omitempty"`
}

// Step is one action of the simulated rollout.
type Step struct {
	Action string `json:"action"`
	Pod    string `json:"pod"`
	Node   string `json:"node,omitempty"`
	// Tied are the nodes that scored as high as Node: the scheduler
	// picks any of them.
	Tied []string `json:"tied,omitempty"`
	// Sampled says the scheduler scores only some of the feasible nodes
	// there, so Node is one of its possible choices.
	Sampled bool `json:"sampled,omitempty"`
}

// Plan asks the engine, as the operator would, about every stage of the
// migration on the cluster: the same conversion, the same targets, the
// same questions. Nothing is written anywhere.
func Plan(c *Cluster, pm *pgv1.PlacementMigration) (Report, error) {
	pm = c.withLiveStatus(pm)
	ns := pm.Namespace
	report := Report{Migration: pm.Name, Namespace: ns}
	inv := c.Inventory(ns)
	refs, err := planning.TargetRefs(pm.Spec, inv.Workloads)
	if err != nil {
		return report, err
	}
	constraint := planning.ConstraintFromSpec(pm.Spec.Constraint)
	report.Constraint = constraint.Describe(pgv1.StageNone, pm.Spec.Final())
	found, missing := planning.Resolve(refs, inv, constraint)
	planning.KeepRecordedRenderings(pm, found, constraint)
	report.Missing = missing
	if len(refs) == 0 {
		report.Missing = append(report.Missing, "(spec.targetSelector selects no workload in namespace "+ns+")")
	}
	if len(found) == 0 {
		return report, nil
	}
	snap, err := c.Snapshot()
	if err != nil {
		return report, err
	}
	sit := planning.Situation{Intent: planning.IntentOf(pm), Targets: found, Others: c.migrationsIn(ns), Policies: c.policiesIn(ns)}
	verdicts, err := planning.EvaluateStages(snap, sit)
	if err != nil {
		return report, err
	}
	report.SchedulerProfile = verdicts[0].Profile
	protected, err := c.protectedPods(pm)
	if err != nil {
		return report, err
	}
	final := pm.Spec.Final()
	weakest := planning.Weakest(pm, found)
	if next := planning.NextStage(weakest, final); next != "" {
		now := time.Now()
		facts := planning.Observe(sit, protected, now)
		facts.Selected = len(refs)
		facts.PodView = planning.PodView(reported(found), pm.Status.Conditions, pm.Spec.Timeout(), now)
		// The spec lowered the final stage: the stage only lowers the
		// constraint, as the operator judges it.
		facts.Lowers = next.Rank() < weakest.Rank()
		report.Verdict = verdictReport(sit, next, verdictAt(verdicts, next), facts)
	} else {
		report.Reached = final
	}
	for _, stage := range planning.Stages(pm.Spec.Final()) {
		// A claim blocks every stage alike.
		v := verdicts[min(len(verdicts)-1, len(report.Stages))]
		v.Stage = stage
		report.Stages = append(report.Stages, stageReport(sit, v))
	}
	if pm.Spec.KeepsDeletionCosts() && !pm.Spec.DryRun {
		if report.Costs, err = planCosts(snap, pm, sit); err != nil {
			return report, err
		}
	}
	if pm.Spec.RebalanceMode() == pgv1.RebalanceEvict && !pm.Spec.DryRun {
		report.Moves, report.MovesNote, err = planMoves(c, pm, found, time.Now())
		if err != nil {
			return report, err
		}
	}
	return report, nil
}

// reported are the targets whose controllers have written their status:
// the pod view of a manifest, which has none, is not judged.
func reported(ts []*planning.Target) []*planning.Target {
	var out []*planning.Target
	for _, t := range ts {
		if t.Reported() {
			out = append(out, t)
		}
	}
	return out
}

// verdictAt is the verdict about a stage: a claim, which stops the
// questions at the first stage, holds every stage alike.
func verdictAt(verdicts []planning.Verdict, stage pgv1.Stage) planning.Verdict {
	for _, v := range verdicts {
		if v.Stage == stage {
			return v
		}
	}
	v := verdicts[len(verdicts)-1]
	v.Stage = stage
	return v
}

// verdictReport is the operator's decision (planning.Decide) about the
// next stage, on the verdict plan asked of its snapshot and the facts read
// with the cluster, and what it records: the hazards once the decision
// reached the capacity and found it, the plan once the decision reaches
// it, and the capacity request it would make. A fact that stops the stage
// before the engine is asked (a claim, an outside cause, the pod view)
// leaves the hazards and the request unsaid, as the operator, which does
// not ask, leaves them.
func verdictReport(sit planning.Situation, stage pgv1.Stage, v planning.Verdict, facts planning.Facts) *VerdictReport {
	// An answered question cannot fail.
	d, _ := planning.Decide(sit, stage, facts, planning.Answered(v))
	r := &VerdictReport{Stage: stage, Outcome: string(d.Kind), Reason: d.Reason, Message: d.Message,
		Request: requestReport(sit.Intent, d.Verdict.Request), Plan: d.Plan}
	if d.Capacity != nil && d.Verdict.Answers[0].Capacity.Enough() {
		r.Hazards = d.Verdict.Hazards()
	}
	return r
}

// requestReport is the capacity request the operator would make, nil when
// it would make none.
func requestReport(in planning.Intent, req *placement.CapacityRequest) *RequestReport {
	if req == nil || req.Shortfall == 0 {
		return nil
	}
	r := &RequestReport{Mode: in.Provision, Placeholders: req.Replicas, Nodes: req.Replicas - req.Resident,
		Shortfall: req.Shortfall, Why: req.Why}
	if req.Capped() {
		r.MaxNodes = in.MaxNodes
	}
	return r
}

// stageReport is the stage's own answer: the stage's capacity, hazards and
// rollouts, and before the hard stage the disruption pre-flight's verdict
// as the guards weigh it. A claim by another migration blocks every stage.
func stageReport(sit planning.Situation, v planning.Verdict) StageReport {
	if v.Claim != nil {
		return StageReport{Stage: v.Stage, Hazards: []pgv1.Hazard{{
			Type: pgv1.ReasonTargetClaimed, Target: v.Claim.Target.String(), Severity: pgv1.SeverityBlocking, Message: v.Claim.Message()}}}
	}
	a := v.Answers[0]
	sr := StageReport{
		Stage:    v.Stage,
		Capacity: capacityReport(a.Capacity),
		Feasible: a.FirstBlocking() == nil,
		Hazards:  planning.HazardsFromAnswer(a.Hazards),
	}
	if h := planning.PreflightOf(sit, v); h != nil {
		sr.Hazards = append(sr.Hazards, planning.HazardsFromAnswer([]placement.Hazard{*h})...)
		sr.Feasible = sr.Feasible && !h.Blocking
	}
	for _, t := range sit.Targets {
		entry, all := planning.TargetPlan(t, v.Stage, v.Answers[:1])
		entry.Recreates = all
		tr := TargetReport{TargetPlan: entry}
		if r, ok := a.Rollouts[t.Ref]; ok {
			tr.Completes = r.Completes
			tr.Note = r.Note
			if r.Blocked != nil {
				tr.Blocked = r.BlockedPod + ": " + r.Blocked.Message
			}
			for _, s := range r.Steps {
				tr.Steps = append(tr.Steps, Step{Action: s.Action, Pod: s.Pod, Node: s.Node, Tied: s.Tied, Sampled: s.Sampled})
			}
		}
		sr.Targets = append(sr.Targets, tr)
	}
	return sr
}

func capacityReport(c placement.Capacity) CapacityReport {
	return CapacityReport{
		Summary:         c.Summary(),
		QualifyingNodes: c.QualifyingNodes, RequiredNodes: c.RequiredNodes,
		QualifyingDomains: c.QualifyingDomains, RequiredDomains: c.RequiredDomains,
		Selector: c.Selector,
	}
}
