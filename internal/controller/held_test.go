package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// The Hard stage's intent is recorded with the Soft stage's verification
// and held through the soak (held.go): a migration says so while it
// soaks, writes nothing before the soak ends, and makes the held write
// only when the decision at the soak's end records the same intent.

func heldSpec(soak time.Duration) pgv1.PlacementMigrationSpec {
	return pgv1.PlacementMigrationSpec{
		Constraint:   pgv1.Constraint{PodAntiAffinity: &pgv1.PodAntiAffinityConstraint{TopologyKey: corev1.LabelHostname}},
		FinalStage:   pgv1.StageHard,
		SoakDuration: &metav1.Duration{Duration: soak},
		Guards:       &pgv1.Guards{MinPodAge: &metav1.Duration{}},
	}
}

func soakingWithHeldIntent(pm *pgv1.PlacementMigration) bool {
	return pm.Status.Operation.Held()
}

func TestTheHardStageIsHeldThroughTheSoakAndWrittenAtItsEnd(t *testing.T) {
	soak := 10 * time.Minute
	w := newWorld(t, pgv1.KindDeployment, heldSpec(soak))
	w.runUntil(soakingWithHeldIntent)

	pm := w.migration()
	op := pm.Status.Operation
	soft := w.changes[0].at
	if pm.Status.Phase != pgv1.PhaseSoaking {
		t.Errorf("a migration holding the Hard stage's intent is Soaking, got %s", pm.Status.Phase)
	}
	if op.Stage != pgv1.StageHard || op.Action != pgv1.ActionApplyStage || op.Targets[0].AppliedGeneration != 0 {
		t.Errorf("the held intent is the Hard stage's, not written yet: %+v", op)
	}
	if !op.NotBefore.After(soft.Add(soak - time.Minute)) {
		t.Errorf("the intent is held until the soak ends (the Soft stage written at %s, soak %s), not before: %s", soft, soak, op.NotBefore)
	}
	c := meta.FindStatusCondition(pm.Status.Conditions, pgv1.ConditionHardApplied)
	if c == nil || c.Reason != pgv1.ReasonIntentRecorded || !strings.Contains(c.Message, "once the soak ends") {
		t.Errorf("HardApplied says the Hard stage is recorded for the soak's end: %+v", c)
	}
	if msg := readyMessage(pm); !strings.Contains(msg, "soaking until") || !strings.Contains(msg, "the Hard stage is recorded") {
		t.Errorf("the migration's message tells of the soak and the recorded stage: %q", msg)
	}
	if len(w.changes) != 1 {
		t.Fatalf("nothing but the Soft stage is written while the intent is held: %+v", w.changes)
	}

	// Quiet reconciles during the soak write nothing and keep the intent.
	writes := w.statusWrites
	for range 3 {
		w.clock.Step(time.Minute)
		w.reconcile()
	}
	if w.statusWrites != writes || !w.migration().Status.Operation.Held() {
		t.Fatalf("a soak that goes on writes nothing and keeps the held intent: %d more status writes, operation %+v", w.statusWrites-writes, w.migration().Status.Operation)
	}

	w.run()
	if len(w.changes) != 2 || w.changes[1].stage != pgv1.StageHard || w.changes[1].at.Sub(soft) < soak {
		t.Fatalf("the Hard stage is written once the soak ends: %+v", w.changes)
	}
	if got := w.statusWrites - writes; got != 2 {
		t.Errorf("from the soak's end the status is written twice (the Hard write with its rollout, the success), got %d", got)
	}
	pm = w.migration()
	hard := pm.Status.Targets[0].Stages[len(pm.Status.Targets[0].Stages)-1]
	if hard.Stage != pgv1.StageHard || hard.StartedAt.Time.Before(op.NotBefore.Time) {
		t.Errorf("the Hard stage's record starts when it was written, not when its intent was held: %+v", hard)
	}
}

// A workload changed during the soak is not the one the intent was
// recorded for: the held write is dropped and the intent recorded again,
// for the workload as it is, before anything is written.
func TestAHeldIntentIsRecordedAgainForAWorkloadChangedDuringTheSoak(t *testing.T) {
	soak := 10 * time.Minute
	w := newWorld(t, pgv1.KindDeployment, heldSpec(soak))
	w.runUntil(soakingWithHeldIntent)
	held := w.migration().Status.Operation.DeepCopy()

	// Someone changes the image: a new generation, rolled out.
	d := w.workload(w.c).(*appsv1.Deployment)
	d.Spec.Template.Spec.Containers[0].Image = "web:2"
	d.Generation++
	if err := w.c.Update(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	w.rollOut()

	w.clock.SetTime(held.NotBefore.Time)
	// The operator dies right after its next write: the reconcile records
	// the new intent before it makes the write the intent names.
	w.crashAfter = w.writes + 1
	w.r.State = w.state()
	if _, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "web-apart"}}); !errors.Is(err, errCrashed) {
		t.Fatalf("the reconcile goes on to write after recording the intent: %v", err)
	}
	recorded := w.migration().Status.Operation
	if recorded == nil || recorded.Held() || recorded.Stage != pgv1.StageHard || recorded.Targets[0].AppliedGeneration != 0 ||
		recorded.Targets[0].GenerationBefore == held.Targets[0].GenerationBefore {
		t.Fatalf("the intent is recorded again for the new generation (held for %d): %+v", held.Targets[0].GenerationBefore, recorded)
	}
	if len(w.changes) != 1 {
		t.Fatalf("nothing is written before the new intent is recorded: %+v", w.changes)
	}
	w.restart()
	w.run()
	if len(w.changes) != 2 || w.changes[1].stage != pgv1.StageHard {
		t.Fatalf("the Hard stage is written from the new record: %+v", w.changes)
	}
}

// The soak's guards run while the intent is held: a pod restarted beyond
// the limit rolls the Soft stage back, and the held Hard stage is never
// written.
func TestARollbackDuringTheSoakDropsTheHeldIntent(t *testing.T) {
	w := newWorld(t, pgv1.KindDeployment, heldSpec(10*time.Minute))
	w.runUntil(soakingWithHeldIntent)

	var pods corev1.PodList
	if err := w.c.List(context.Background(), &pods); err != nil {
		t.Fatal(err)
	}
	p := &pods.Items[0]
	p.Status.ContainerStatuses[0].RestartCount = 9
	if err := w.c.Status().Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	w.run()
	pm := w.migration()
	if pm.Status.Phase != pgv1.PhaseRolledBack {
		t.Fatalf("restarts during the soak roll the Soft stage back: phase %s, %s", pm.Status.Phase, readyMessage(pm))
	}
	for _, c := range w.changes {
		if c.stage == pgv1.StageHard {
			t.Fatalf("a held intent is never written once the soak rolls back: %+v", w.changes)
		}
	}
}

// Another migration is not held up by an intent held through a soak: it
// has nothing in flight.
func TestAHeldIntentIsNotAWriteInFlight(t *testing.T) {
	w := newWorld(t, pgv1.KindDeployment, heldSpec(10*time.Minute))
	w.runUntil(soakingWithHeldIntent)
	pm := w.migration()
	ref := pgv1.TargetRef{Kind: pgv1.KindDeployment, Name: "web"}
	if name, _ := planning.InFlight(planning.Intent{}, []pgv1.PlacementMigration{*pm}, []pgv1.TargetRef{ref}); name != "" {
		t.Errorf("a held intent is not a write in flight, found %s", name)
	}
	pm.Status.Operation.NotBefore = nil
	if name, _ := planning.InFlight(planning.Intent{}, []pgv1.PlacementMigration{*pm}, []pgv1.TargetRef{ref}); name != pm.Name {
		t.Errorf("a due write is in flight, found %q", name)
	}
}

// reconcile runs one reconcile of the migration.
func (w *world) reconcile() {
	w.r.State = w.state()
	if _, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "web-apart"}}); err != nil {
		w.t.Fatal(err)
	}
}

func readyMessage(pm *pgv1.PlacementMigration) string {
	if c := meta.FindStatusCondition(pm.Status.Conditions, pgv1.ConditionReady); c != nil {
		return c.Message
	}
	return ""
}
