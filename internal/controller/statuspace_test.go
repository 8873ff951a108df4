package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

func statusWith(phase pgv1.Phase, conds ...metav1.Condition) *pgv1.PlacementMigrationStatus {
	return &pgv1.PlacementMigrationStatus{Phase: phase, Conditions: conds}
}

func cond(typ, status, reason, message string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: reason, Message: message}
}

// Only the wording of progress under a reason that stays is progress: a
// new reason, a new status, a diagnosis's words, another field or a
// condition added is a change to write at once.
func TestOnlyProgressIsTheWordingOfProgressAlone(t *testing.T) {
	rolling := cond(pgv1.ConditionReady, "False", pgv1.ReasonRolloutInProgress, "waiting for web-1, web-2")
	feasible := cond(pgv1.ConditionFeasible, "True", pgv1.ReasonFeasible, "the rollout completes")
	before := statusWith(pgv1.PhaseApplyingSoft, feasible, rolling)
	for name, tc := range map[string]struct {
		after *pgv1.PlacementMigrationStatus
		want  bool
	}{
		"a rollout a pod further on": {statusWith(pgv1.PhaseApplyingSoft, feasible,
			cond(pgv1.ConditionReady, "False", pgv1.ReasonRolloutInProgress, "waiting for web-2")), true},
		"the pod view a step further": {statusWith(pgv1.PhaseApplyingSoft, feasible,
			cond(pgv1.ConditionReady, "False", pgv1.ReasonWaitingForPodView, "waiting for web-2")), false},
		"a new reason": {statusWith(pgv1.PhaseApplyingSoft, feasible,
			cond(pgv1.ConditionReady, "False", pgv1.ReasonSoaking, "soaking")), false},
		"a new status": {statusWith(pgv1.PhaseApplyingSoft, feasible,
			cond(pgv1.ConditionReady, "True", pgv1.ReasonRolloutInProgress, "waiting for web-2")), false},
		"a diagnosis reworded": {statusWith(pgv1.PhaseApplyingSoft,
			cond(pgv1.ConditionFeasible, "True", pgv1.ReasonFeasible, "the rollout completes, and more"), rolling), false},
		"a progress message and a phase": {statusWith(pgv1.PhaseSoaking, feasible,
			cond(pgv1.ConditionReady, "False", pgv1.ReasonRolloutInProgress, "waiting for web-2")), false},
		"a condition added": {statusWith(pgv1.PhaseApplyingSoft, feasible, rolling,
			cond(pgv1.ConditionHardApplied, "False", pgv1.ReasonProgressing, "")), false},
		"nothing": {statusWith(pgv1.PhaseApplyingSoft, feasible, rolling), false},
	} {
		if got := onlyProgress(before, tc.after); got != tc.want {
			t.Errorf("%s: onlyProgress = %v, want %v", name, got, tc.want)
		}
	}
	if before.Conditions[1].Message != "waiting for web-1, web-2" {
		t.Errorf("onlyProgress changed the status it compared: %q", before.Conditions[1].Message)
	}
}

// A change of progress alone waits until the migration's last status
// write is progressRefresh old; any other change, a migration never
// written by this process, and one forgotten are written at once.
func TestStatusPaceHoldsProgressUntilTheRefresh(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "a"}
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	before := statusWith(pgv1.PhaseApplyingSoft, cond(pgv1.ConditionReady, "False", pgv1.ReasonRolloutInProgress, "waiting for web-1, web-2"))
	progress := statusWith(pgv1.PhaseApplyingSoft, cond(pgv1.ConditionReady, "False", pgv1.ReasonRolloutInProgress, "waiting for web-2"))
	milestone := statusWith(pgv1.PhaseSoaking, cond(pgv1.ConditionReady, "False", pgv1.ReasonSoaking, "soaking"))

	var p statusPace
	if held := p.hold(key, before, progress, t0); held != 0 {
		t.Fatalf("a migration not written yet is held %v", held)
	}
	p.wrote(key, t0)
	if held := p.hold(key, before, progress, t0.Add(4*time.Second)); held != progressRefresh-4*time.Second {
		t.Errorf("progress 4s after a write is held %v, want %v", held, progressRefresh-4*time.Second)
	}
	if held := p.hold(key, before, milestone, t0.Add(time.Second)); held != 0 {
		t.Errorf("a milestone is held %v", held)
	}
	if held := p.hold(key, before, progress, t0.Add(progressRefresh)); held != 0 {
		t.Errorf("progress a refresh after the write is held %v", held)
	}
	if held := p.hold(types.NamespacedName{Namespace: "ns", Name: "b"}, before, progress, t0.Add(time.Second)); held != 0 {
		t.Errorf("another migration is held %v", held)
	}
	p.forget(key)
	if held := p.hold(key, before, progress, t0.Add(time.Second)); held != 0 {
		t.Errorf("a forgotten migration is held %v", held)
	}
}

// A new migration whose first word would be that its view of the pods is
// catching up says nothing until it is firstWordGrace old; a gap with a
// cause, any other first word and any later one are written at once.
func TestANewMigrationWaitsForItsPodViewBeforeSayingSo(t *testing.T) {
	created := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	unwritten := statusWith("")
	written := statusWith(pgv1.PhaseWaitingForCapacity, cond(pgv1.ConditionCapacityAvailable, "False", pgv1.ReasonInsufficientCapacity, "1 of 2"))
	for name, tc := range map[string]struct {
		before     *pgv1.PlacementMigrationStatus
		catchingUp bool
		at         time.Duration
		want       time.Duration
	}{
		"catching up, half a second in":        {unwritten, true, 500 * time.Millisecond, firstWordGrace - 500*time.Millisecond},
		"catching up, at the grace's end":      {unwritten, true, firstWordGrace, 0},
		"a gap with a cause":                   {unwritten, false, 0, 0},
		"catching up after a word was written": {written, true, 0, 0},
	} {
		if got := firstWordWait(tc.before, tc.catchingUp, created, created.Add(tc.at)); got != tc.want {
			t.Errorf("%s: waits %v, want %v", name, got, tc.want)
		}
	}
}

// The status that ends a migration waits while its targets' pods are only
// leaving, from the first pass that held it until settleGrace later; a
// write starts the wait afresh, and a migration already succeeded, or a
// status that does not end one, waits for nothing.
func TestASuccessWaitsForItsLeavingPodsUntilTheGrace(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "a"}
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	verifying := statusWith(pgv1.PhaseApplyingHard)
	succeeded := statusWith(pgv1.PhaseSucceeded)
	var p statusPace
	if got := p.settleWait(key, verifying, verifying, true, t0); got != 0 {
		t.Errorf("a status that does not end the migration waits %v", got)
	}
	if got := p.settleWait(key, verifying, succeeded, false, t0); got != 0 {
		t.Errorf("a success with nothing leaving waits %v", got)
	}
	if got := p.settleWait(key, succeeded, succeeded, true, t0); got != 0 {
		t.Errorf("a migration already succeeded waits %v", got)
	}
	if got := p.settleWait(key, verifying, succeeded, true, t0); got != settleGrace {
		t.Errorf("the first pass holding a success waits %v, want %v", got, settleGrace)
	}
	if got := p.settleWait(key, verifying, succeeded, true, t0.Add(4*time.Second)); got != settleGrace-4*time.Second {
		t.Errorf("a pass 4s later waits %v, want %v", got, settleGrace-4*time.Second)
	}
	if got := p.settleWait(types.NamespacedName{Namespace: "ns", Name: "b"}, verifying, succeeded, true, t0.Add(4*time.Second)); got != settleGrace {
		t.Errorf("another migration's first hold waits %v, want %v", got, settleGrace)
	}
	if got := p.settleWait(key, verifying, succeeded, true, t0.Add(settleGrace)); got != 0 {
		t.Errorf("a pass at the grace's end waits %v", got)
	}
	p.wrote(key, t0.Add(settleGrace))
	if got := p.settleWait(key, verifying, succeeded, true, t0.Add(20*time.Second)); got != settleGrace {
		t.Errorf("after a write the wait starts afresh: %v, want %v", got, settleGrace)
	}
}
