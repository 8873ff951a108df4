package gates

import (
	"context"
	"fmt"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	fluxcel "github.com/fluxcd/pkg/runtime/cel"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/test/health"
)

// fluxEvaluators reads the shipped Kustomizations into Flux's own type,
// refusing unknown fields, and builds Flux's status evaluator from each
// one's healthCheckExprs for PlacementMigration.
func fluxEvaluators(t *testing.T) map[string]*fluxcel.StatusEvaluator {
	t.Helper()
	out := map[string]*fluxcel.StatusEvaluator{}
	for _, u := range fleetObjects(t, "flux-kustomizations.yaml") {
		data, err := yaml.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		var k kustomizev1.Kustomization
		if err := yaml.UnmarshalStrict(data, &k); err != nil {
			t.Fatalf("%s is not a Kustomization to Flux: %v", u.GetName(), err)
		}
		for _, hc := range k.Spec.HealthCheckExprs {
			if hc.APIVersion != pgv1.GroupVersion.String() || hc.Kind != "PlacementMigration" {
				continue
			}
			ev, err := fluxcel.NewStatusEvaluator(&hc.HealthCheckExpressions)
			if err != nil {
				t.Fatalf("%s: Flux refuses the expressions: %v", k.Name, err)
			}
			out[k.Name] = ev
		}
		if out[k.Name] == nil {
			t.Fatalf("%s has no healthCheckExprs for PlacementMigration", k.Name)
		}
	}
	return out
}

// Flux's verdict on every phase of a migration, read back from a real API
// server the way kustomize-controller's poller gets it: a new migration
// the operator has not seen, each phase for the current spec, and a
// success for an older spec. Only a success for the spec just applied lets
// the next wave go; Stalled fails the wave at once.
func TestFluxGateOnEveryPhase(t *testing.T) {
	s := apiServer(t)
	ctx := context.Background()
	migrations := s.dynamic.Resource(schema.GroupVersionResource{Group: pgv1.GroupVersion.Group, Version: pgv1.GroupVersion.Version, Resource: "placementmigrations"}).Namespace("db")
	evaluators := fluxEvaluators(t)

	read := func(t *testing.T, u *unstructured.Unstructured) map[string]status.Status {
		t.Helper()
		got := map[string]status.Status{}
		for name, ev := range evaluators {
			res, err := ev.Evaluate(ctx, u)
			if err != nil {
				t.Fatalf("%s: Flux could not evaluate the migration: %v", name, err)
			}
			got[name] = res.Status
		}
		return got
	}
	expect := func(t *testing.T, what string, got map[string]status.Status, want status.Status) {
		t.Helper()
		for name, st := range got {
			if st != want {
				t.Errorf("%s: %s reads %s, want %s", what, name, st, want)
			}
		}
	}

	for i, tc := range []struct {
		phase    pgv1.Phase
		observed int64 // generation the status is about, of 2
		want     status.Status
	}{
		{pgv1.PhasePending, 2, status.InProgressStatus},
		{pgv1.PhaseWaitingForCapacity, 2, status.InProgressStatus},
		{pgv1.PhaseApplyingSoft, 2, status.InProgressStatus},
		{pgv1.PhaseSoaking, 2, status.InProgressStatus},
		{pgv1.PhaseApplyingHard, 2, status.InProgressStatus},
		{pgv1.PhaseVerifying, 2, status.InProgressStatus},
		{pgv1.PhaseRollingBack, 2, status.InProgressStatus},
		{pgv1.PhasePaused, 2, status.InProgressStatus},
		{pgv1.PhaseSucceeded, 2, status.CurrentStatus},
		{pgv1.PhasePlanned, 2, status.CurrentStatus},
		{pgv1.PhaseBlocked, 2, status.FailedStatus},
		{pgv1.PhaseRolledBack, 2, status.FailedStatus},
		{pgv1.PhaseFailed, 2, status.FailedStatus},
		{pgv1.PhaseDegraded, 2, status.FailedStatus},
		{pgv1.PhaseSucceeded, 1, status.InProgressStatus},
		{pgv1.PhaseBlocked, 1, status.InProgressStatus},
	} {
		t.Run(fmt.Sprintf("%s/observed-%d", tc.phase, tc.observed), func(t *testing.T) {
			pm := health.MigrationIn(tc.phase, tc.observed)
			pm.Name, pm.Namespace = fmt.Sprintf("graphdb-%d", i), "db"
			pm.Generation = 0
			pm.Spec = pgv1.PlacementMigrationSpec{
				Targets:    []pgv1.TargetRef{{Kind: pgv1.KindDeployment, Name: "graphdb"}},
				Constraint: pgv1.Constraint{PodAntiAffinity: &pgv1.PodAntiAffinityConstraint{TopologyKey: "kubernetes.io/hostname"}},
			}
			wantStatus := pm.Status
			raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pm)
			if err != nil {
				t.Fatal(err)
			}
			delete(raw, "status")
			created, err := migrations.Create(ctx, &unstructured.Unstructured{Object: raw}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			expect(t, "a migration the operator has not seen", read(t, created), status.InProgressStatus)

			// A second generation: the spec changed once.
			if err := unstructured.SetNestedField(created.Object, "topology.kubernetes.io/zone", "spec", "constraint", "podAntiAffinity", "topologyKey"); err != nil {
				t.Fatal(err)
			}
			updated, err := migrations.Update(ctx, created, metav1.UpdateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for j := range wantStatus.Conditions {
				wantStatus.Conditions[j].LastTransitionTime = metav1.Now()
			}
			st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&wantStatus)
			if err != nil {
				t.Fatal(err)
			}
			updated.Object["status"] = st
			if _, err := migrations.UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			got, err := migrations.Get(ctx, pm.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.GetGeneration() != 2 {
				t.Fatalf("generation %d, want 2", got.GetGeneration())
			}
			expect(t, string(tc.phase), read(t, got), tc.want)
		})
	}
}

// Why the CRD defaults status to {}: without a status key (a CRD installed
// before that default), Flux's evaluator cannot evaluate an expression
// that names status, and Flux reports an error instead of InProgress.
func TestFluxWithoutAStatusKey(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": pgv1.GroupVersion.String(), "kind": "PlacementMigration",
		"metadata": map[string]any{"name": "graphdb", "namespace": "db", "generation": int64(1)},
		"spec":     map[string]any{},
	}}
	for name, ev := range fluxEvaluators(t) {
		if _, err := ev.Evaluate(context.Background(), u); err == nil {
			t.Errorf("%s evaluated a migration without status; the default in the CRD would be needless", name)
		}
	}
}
