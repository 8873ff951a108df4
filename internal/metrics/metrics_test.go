package metrics

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

func TestAPhaseChangeReplacesTheSeries(t *testing.T) {
	RecordPhase("ns", "m", "WaitingForCapacity")
	RecordPhase("ns", "m", "Succeeded")
	RecordPhase("ns", "other", "Blocked")
	want := `
# HELP placementguard_migration_phase 1 for the current phase of each PlacementMigration.
# TYPE placementguard_migration_phase gauge
placementguard_migration_phase{name="m",namespace="ns",phase="Succeeded"} 1
placementguard_migration_phase{name="other",namespace="ns",phase="Blocked"} 1
`
	if err := testutil.CollectAndCompare(migrationPhase, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	Forget("ns", "other")
	if n := testutil.CollectAndCount(migrationPhase); n != 1 {
		t.Fatalf("after Forget, %d series remain, want 1", n)
	}
}

func TestEveryMetricIsServedFromTheManagerRegistry(t *testing.T) {
	RecordCapacity("ns", "m", 1, 2)
	ObserveStage("Soft", "verified", 42*time.Second)
	CountRollback("StageTimedOut")
	ObserveEvaluation(12 * time.Millisecond)
	RecordPendingPods("ns", "m", 0, 0)
	CountReconcile("ns", "m")
	CountPodAdded()
	CountFinding("ns", "Deployment", "RolloutDeadlock", "Warn")
	ObserveAdmission("Deployment", "Off", true, 10*time.Microsecond)
	RecordSkew("ns", "m", "Deployment/web", 1)
	CountDeletionCostWrites("ns", "m", "written", 3)
	CountMove("ns", "m", "landed")
	RecordUnknownMode("ns", true)
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var served []string
	for _, f := range families {
		served = append(served, f.GetName())
	}
	for _, name := range Names {
		if !slices.Contains(served, name) {
			t.Errorf("%s is not served by the manager's registry", name)
		}
	}
	if v := testutil.ToFloat64(requiredNodes.WithLabelValues("ns", "m")); v != 2 {
		t.Fatalf("required nodes = %v", v)
	}
}

func TestPendingPodsAreCountedByCauseAndForgotten(t *testing.T) {
	pendingPods.Reset()
	RecordPendingPods("ns", "degraded", 2, 1)
	RecordPendingPods("ns", "degraded", 0, 1)
	want := `
# HELP placementguard_pending_target_pods Target pods of a succeeded PlacementMigration Pending past the unschedulable grace, by cause: constraint (the migration's constraint keeps them out) or other.
# TYPE placementguard_pending_target_pods gauge
placementguard_pending_target_pods{cause="constraint",name="degraded",namespace="ns"} 0
placementguard_pending_target_pods{cause="other",name="degraded",namespace="ns"} 1
`
	if err := testutil.CollectAndCompare(pendingPods, strings.NewReader(want), "placementguard_pending_target_pods"); err != nil {
		t.Fatal(err)
	}
	Forget("ns", "degraded")
	if n := testutil.CollectAndCount(pendingPods); n != 0 {
		t.Fatalf("after Forget, %d series remain, want 0", n)
	}
}

func TestReconcilesAreCountedPerMigrationAndForgotten(t *testing.T) {
	CountReconcile("ns", "counted")
	CountReconcile("ns", "counted")
	CountReconcile("ns", "other")
	if got := Reconciles("ns", "counted"); got != 2 {
		t.Fatalf("reconciles of ns/counted = %v, want 2", got)
	}
	Forget("ns", "counted")
	if got := testutil.ToFloat64(reconciles.WithLabelValues("ns", "other")); got != 1 {
		t.Fatalf("forgetting one migration changed another's count: %v", got)
	}
	if got := Reconciles("ns", "counted"); got != 0 {
		t.Fatalf("a forgotten migration still counts %v reconciles", got)
	}
}
