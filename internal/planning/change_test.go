package planning

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// A change written straight into a workload is judged as the migration
// that would make it would be judged by the operator: with the other
// migrations of the namespace and, off the request's path, the pre-flight.
func TestAChangeIsJudgedAsTheMigrationThatWouldMakeIt(t *testing.T) {
	apart := pgv1.Constraint{PodAntiAffinity: &pgv1.PodAntiAffinityConstraint{TopologyKey: corev1.LabelHostname}}
	holding := func(name string, c pgv1.Constraint) pgv1.PlacementMigration {
		pm := pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "payments", CreationTimestamp: metav1.NewTime(time.Unix(1, 0))},
			Spec: pgv1.PlacementMigrationSpec{Targets: []pgv1.TargetRef{{Kind: pgv1.KindDeployment, Name: "api"}}, Constraint: c}}
		pm.Status.Targets = []pgv1.TargetStatus{{Kind: pgv1.KindDeployment, Name: "api", Stage: pgv1.StageSoft}}
		return pm
	}
	budget := policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "api"}, Spec: policyv1.PodDisruptionBudgetSpec{
		MaxUnavailable: ptr.To(intstr.FromInt32(0)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}}}
	cases := []struct {
		name        string
		nodes       int
		migrations  []pgv1.PlacementMigration
		policies    Policies
		preflight   bool
		carriedBy   bool // the replaced spec had the constraint
		want, never string
		says        string
	}{
		{name: "a change that fits says nothing", nodes: 4, never: "any"},
		{name: "another migration writing the field claims it", nodes: 4, migrations: []pgv1.PlacementMigration{holding("api-apart", apart)},
			want: pgv1.ReasonTargetClaimed, says: "PlacementMigration api-apart writes"},
		{name: "one that only names the workload, not created yet (manifests beside it), claims it too", nodes: 4, migrations: []pgv1.PlacementMigration{{
			ObjectMeta: metav1.ObjectMeta{Name: "api-apart", Namespace: "payments"},
			Spec:       pgv1.PlacementMigrationSpec{Targets: []pgv1.TargetRef{{Kind: pgv1.KindDeployment, Name: "api"}}, Constraint: apart}}},
			want: pgv1.ReasonTargetClaimed, says: "PlacementMigration api-apart writes"},
		{name: "a compatible one claims nothing", nodes: 4, migrations: []pgv1.PlacementMigration{holding("api-zones",
			pgv1.Constraint{TopologySpread: &pgv1.TopologySpreadConstraint{TopologyKey: corev1.LabelTopologyZone, MaxSkew: 1}})},
			never: pgv1.ReasonTargetClaimed},
		{name: "a constraint the workload carried before the change claims nothing", nodes: 4, migrations: []pgv1.PlacementMigration{holding("api-apart", apart)},
			carriedBy: true, never: pgv1.ReasonTargetClaimed},
		{name: "the pre-flight, asked for: a budget forbids every eviction", nodes: 4, policies: Policies{Budgets: []policyv1.PodDisruptionBudget{budget}},
			preflight: true, want: pgv1.ReasonDrainBlockedByBudget, says: "once the change has rolled out, PodDisruptionBudget api"},
		{name: "the pre-flight, not asked for (the admission request's path)", nodes: 4, policies: Policies{Budgets: []policyv1.PodDisruptionBudget{budget}},
			never: pgv1.ReasonDrainBlockedByBudget},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap, ts := apartCluster(t, corev1.LabelHostname, tc.nodes, 3, 1)
			ch := Change{Target: ts[0].Target, Migrations: tc.migrations, Policies: tc.policies, Preflight: tc.preflight}
			if tc.carriedBy {
				ch.Before = ts[0].Workload.Template.Spec.DeepCopy()
			}
			hs := judged(t, snap, ch)
			if tc.never == "any" && len(hs) > 0 {
				t.Fatalf("want no finding, got %+v", hs)
			}
			if tc.never != "" && has(hs, tc.never) != nil {
				t.Fatalf("want no %s, got %+v", tc.never, hs)
			}
			if tc.want == "" {
				return
			}
			h := has(hs, tc.want)
			if h == nil {
				t.Fatalf("want %s, got %+v", tc.want, hs)
			}
			if h.Blocking || !strings.Contains(h.Message, tc.says) || h.Workload != (pgv1.TargetRef{Kind: pgv1.KindDeployment, Name: "api"}) {
				t.Errorf("finding %+v: want it for information, on Deployment/api, saying %q", h, tc.says)
			}
		})
	}
}

// The change is judged with the final stage of every compatible migration
// of the workload: a zone spread alone rolls out, but with the hostname
// anti-affinity another migration is taking the workload to, and replicas
// == nodes, its surge pod has nowhere to go.
func TestAChangeIsJudgedWithTheOtherMigrationsFinalStages(t *testing.T) {
	snap, ts := apiCluster(t, corev1.PodSpec{TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
		WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}}}}, 3, 3, 3)
	target := *ts[0].Target

	alone := judged(t, snap, Change{Target: &target})
	if h := has(alone, placement.HazardRolloutDeadlock); h != nil {
		t.Fatalf("the spread alone rolls out: %+v", alone)
	}
	apartMigration := pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Name: "api-apart", Namespace: "payments", CreationTimestamp: metav1.NewTime(time.Unix(1, 0))},
		Spec: pgv1.PlacementMigrationSpec{Targets: []pgv1.TargetRef{{Kind: pgv1.KindDeployment, Name: "api"}},
			Constraint: pgv1.Constraint{PodAntiAffinity: &pgv1.PodAntiAffinityConstraint{TopologyKey: corev1.LabelHostname}}}}
	with := judged(t, snap, Change{Target: &target, Migrations: []pgv1.PlacementMigration{apartMigration}})
	if h := has(with, placement.HazardRolloutDeadlock); h == nil || !h.Blocking {
		t.Fatalf("with api-apart's hard anti-affinity the rollout deadlocks: %+v", with)
	}
	apartMigration.Spec.DryRun = true
	if h := has(judged(t, snap, Change{Target: &target, Migrations: []pgv1.PlacementMigration{apartMigration}}), placement.HazardRolloutDeadlock); h != nil {
		t.Fatalf("a dry run writes nothing, and is not judged with: %+v", h)
	}
}

func judged(t *testing.T, snap *placement.Snapshot, ch Change) []placement.Hazard {
	t.Helper()
	found, err := JudgeChange(snap, ch, func(placement.Constraint) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	var hs []placement.Hazard
	for _, f := range found {
		hs = append(hs, f.Hazards...)
	}
	return hs
}

func has(hs []placement.Hazard, typ string) *placement.Hazard {
	for i := range hs {
		if hs[i].Type == typ {
			return &hs[i]
		}
	}
	return nil
}
