package plugin

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// The status tree shows what a person on call needs first: the phase and
// why, the conditions, the write in flight, each target's stages, the
// hazards and the plan.
func TestStatusTree(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	pm := &pgv1.PlacementMigration{
		ObjectMeta: metav1.ObjectMeta{Name: "web-apart", Namespace: "shop", Generation: 2},
		Spec:       pgv1.PlacementMigrationSpec{Paused: true},
		Status: pgv1.PlacementMigrationStatus{
			ObservedGeneration: 2, Phase: pgv1.PhaseSoaking, Stage: pgv1.StageSoft,
			Conditions: []metav1.Condition{
				{Type: pgv1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Soaking", Message: "Soaking the Soft stage for 5m before the Hard stage", LastTransitionTime: at(3 * time.Minute)},
				{Type: pgv1.ConditionCapacityAvailable, Status: metav1.ConditionTrue, Reason: pgv1.ReasonCapacityFound, Message: "3 qualifying nodes (3 needed) in 3 domains (3 needed)", LastTransitionTime: at(10 * time.Minute)},
			},
			Operation: &pgv1.Operation{Action: pgv1.ActionApplyStage, From: pgv1.StageSoft, Stage: pgv1.StageHard, StartedAt: at(5 * time.Second)},
			Capacity:  &pgv1.CapacityStatus{QualifyingNodes: 3, RequiredNodes: 3, QualifyingDomains: 3, RequiredDomains: 3, Summary: "3/3"},
			Targets: []pgv1.TargetStatus{{Kind: pgv1.KindDeployment, Name: "web", Stage: pgv1.StageSoft,
				Verified: &pgv1.StageMilestone{Stage: pgv1.StageSoft, At: at(3 * time.Minute)},
				Pods:     &pgv1.PodSetRecord{PodSetSummary: pgv1.PodSetSummary{Count: 3, Restarts: 1}},
				Stages:   []pgv1.StageRecord{{Stage: pgv1.StageSoft, Outcome: pgv1.StageOutcome("Verified")}, {Stage: pgv1.StageHard}}}},
			Hazards: []pgv1.Hazard{{Type: placement.HazardRolloutDeadlock, Severity: pgv1.SeverityBlocking, Target: "Deployment/web", Message: "the rollout would deadlock"}},
			Plan:    []pgv1.TargetPlan{{Kind: pgv1.KindDeployment, Name: "web", Stage: pgv1.StageHard, Change: "adds a required term", RecreatesCount: 7, Recreates: []string{"a", "b", "c", "d", "e"}}},
		},
	}
	var out bytes.Buffer
	printStatusTree(&out, pm, now)
	golden(t, "status.txt", out.String())
	for _, want := range []string{"Phase: Soaking (spec.paused), stage Soft", "Operation in flight: ApplyStage Soft -> Hard since 5s ago",
		"Deployment/web: stage Soft, Soft verified 3m ago, 3 pod(s), 1 restart(s)", "recreates 7 pod(s) a, b, c, d, e and 2 more", "Blocking RolloutDeadlock Deployment/web"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the tree lacks %q:\n%s", want, out.String())
		}
	}
}

// A Hard stage held through the soak is told apart from a write in
// flight: when it is written, and on what condition.
func TestStatusTreeTellsAHeldStage(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	pm := &pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Name: "web-apart", Namespace: "shop"},
		Status: pgv1.PlacementMigrationStatus{Phase: pgv1.PhaseSoaking, Stage: pgv1.StageSoft,
			Operation: &pgv1.Operation{Action: pgv1.ActionApplyStage, From: pgv1.StageSoft, Stage: pgv1.StageHard,
				StartedAt: metav1.NewTime(now.Add(-time.Minute)), NotBefore: &metav1.Time{Time: now.Add(4 * time.Minute)}}}}
	var out bytes.Buffer
	printStatusTree(&out, pm, now)
	want := "Operation held: ApplyStage Soft -> Hard, recorded 60s ago, written after 2026-11-23T12:04:00Z if the decision then is the same"
	if !strings.Contains(out.String(), want) || strings.Contains(out.String(), "in flight") {
		t.Errorf("the tree says %q and nothing in flight:\n%s", want, out.String())
	}
}

// A migration that keeps its constraint shows the move in flight and the
// moves made, newest first, and says nothing of rebalancing otherwise.
func TestStatusTreeShowsTheMoves(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	pm := &pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Name: "web-zones", Namespace: "shop"},
		Spec: pgv1.PlacementMigrationSpec{Rebalance: &pgv1.Rebalance{Mode: pgv1.RebalanceEvict}},
		Status: pgv1.PlacementMigrationStatus{Rebalance: &pgv1.RebalanceStatus{
			Move: &pgv1.PodMove{Target: "Deployment/web", Pod: "web-3", From: "zone-b", To: "zone-c", Node: "c-1", Evicted: true, At: at(4 * time.Second)},
			Moves: []pgv1.PodMove{
				{Target: "Deployment/web", Pod: "web-1", From: "zone-a", To: "zone-c", At: at(10 * time.Minute), Result: "Landed", Replacement: "web-9", LandedIn: "zone-c"},
				{Target: "Deployment/web", Pod: "web-2", From: "zone-a", To: "zone-c", At: at(time.Minute), Result: "Refused", Message: "Cannot evict pod as it would violate the pod's disruption budget."},
			}}}}
	var out bytes.Buffer
	printStatusTree(&out, pm, now)
	text := out.String()
	for _, want := range []string{"Rebalance: Evict, at most 6 move(s) an hour",
		"Moving web-3 of Deployment/web from zone-b to zone-c (node c-1): evicted, waiting for its replacement, since 4s ago",
		"Refused web-2 of Deployment/web from zone-a to zone-c, 60s ago: Cannot evict pod",
		"Landed web-1 of Deployment/web from zone-a to zone-c, 10m ago: replaced by web-9 in zone-c"} {
		if !strings.Contains(text, want) {
			t.Errorf("the tree lacks %q:\n%s", want, text)
		}
	}
	if strings.Index(text, "Refused web-2") > strings.Index(text, "Landed web-1") {
		t.Errorf("the newest move comes first:\n%s", text)
	}
	pm.Spec.Rebalance, pm.Status.Rebalance = nil, nil
	out.Reset()
	printStatusTree(&out, pm, now)
	if strings.Contains(out.String(), "Rebalance") {
		t.Errorf("a migration without rebalance shows it:\n%s", out.String())
	}
}

// The list says where each migration is and why, in kubectl's columns.
func TestMigrationTable(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	items := []pgv1.PlacementMigration{
		{ObjectMeta: metav1.ObjectMeta{Name: "web-apart", Namespace: "shop", CreationTimestamp: metav1.NewTime(now.Add(-2 * time.Hour))},
			Status: pgv1.PlacementMigrationStatus{Phase: pgv1.PhaseBlocked, Targets: []pgv1.TargetStatus{{}},
				Conditions: []metav1.Condition{{Type: pgv1.ConditionReady, Status: metav1.ConditionFalse, Reason: placement.HazardRolloutDeadlock}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "flux-spread", Namespace: "flux-system", CreationTimestamp: metav1.NewTime(now.Add(-30 * time.Second))},
			Spec: pgv1.PlacementMigrationSpec{FinalStage: pgv1.StageSoft}},
	}
	var out bytes.Buffer
	printMigrationTable(&out, items, true, false, false, now)
	golden(t, "status-list.txt", out.String())
	if !strings.Contains(out.String(), "shop         web-apart    Blocked  <none>  Hard   1        RolloutDeadlock  120m") {
		t.Errorf("table:\n%s", out.String())
	}
}
