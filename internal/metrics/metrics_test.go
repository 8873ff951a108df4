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
