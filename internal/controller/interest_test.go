package controller

import (
	"context"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/clusterstate"
	"github.com/placement-guard/placement-guard/internal/placement"
)

func names(keys []types.NamespacedName) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.Name
	}
	sort.Strings(out)
	return out
}

func requestNames(reqs []reconcile.Request) []string {
	keys := make([]types.NamespacedName, len(reqs))
	for i, r := range reqs {
		keys[i] = r.NamespacedName
	}
	return names(keys)
}

// settledScope is a migration whose one target is verified at the final
// stage, nothing in flight: what a Succeeded migration has recorded.
func settledScope(name string, spec pgv1.PlacementMigrationSpec, c placement.Constraint) *scope {
	pm := &pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}, Spec: spec}
	pm.Status.Targets = []pgv1.TargetStatus{{Kind: pgv1.KindDeployment, Name: "web", Verified: &pgv1.StageMilestone{Stage: spec.Final()}}}
	return &scope{pm: pm, constraint: c}
}

// A settled migration is told only of the pods and workloads it depends
// on; one at work of everything in its namespace; none of another
// namespace's pods.
func TestAChangeReachesOnlyTheMigrationsItConcerns(t *testing.T) {
	in := clusterstate.NewRouter(nil)
	web := settledScope("web-apart", pgv1.PlacementMigrationSpec{
		Targets: []pgv1.TargetRef{{Kind: pgv1.KindDeployment, Name: "web"}},
		Guards:  &pgv1.Guards{ProtectedPods: pgv1.Labels(map[string]string{"tier": "db"})},
	}, placement.Constraint{AntiAffinity: &placement.AntiAffinity{TopologyKey: "kubernetes.io/hostname",
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}})
	in.Set(types.NamespacedName{Namespace: "shop", Name: "web-apart"}, web.interestOf())
	selected := settledScope("by-team", pgv1.PlacementMigrationSpec{
		TargetSelector: &pgv1.TargetSelector{Selector: *pgv1.Labels(map[string]string{"team": "checkout"})},
	}, placement.Constraint{Spread: &placement.Spread{TopologyKey: "zone",
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "checkout"}}}})
	in.Set(types.NamespacedName{Namespace: "shop", Name: "by-team"}, selected.interestOf())
	in.MarkAtWork(types.NamespacedName{Namespace: "shop", Name: "rolling"})

	cases := []struct {
		name          string
		ns            string
		before, after map[string]string
		want          []string
	}{
		{"a target's pod", "shop", nil, map[string]string{"app": "web"}, []string{"rolling", "web-apart"}},
		{"a protected pod", "shop", nil, map[string]string{"tier": "db"}, []string{"rolling", "web-apart"}},
		{"a pod the spread counts", "shop", nil, map[string]string{"team": "checkout"}, []string{"by-team", "rolling"}},
		{"a pod leaving the selector", "shop", map[string]string{"app": "web"}, map[string]string{"app": "api"}, []string{"rolling", "web-apart"}},
		{"an unrelated pod", "shop", nil, map[string]string{"app": "batch"}, []string{"rolling"}},
		{"a pod of another namespace", "jobs", nil, map[string]string{"app": "web"}, []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := names(in.PodChange(tc.ns, tc.before, tc.after))
			if len(got) != len(tc.want) || (len(got) > 0 && !equalStrings(got, tc.want)) {
				t.Errorf("concerned %v, want %v", got, tc.want)
			}
		})
	}

	workloads := []struct {
		name, kind, workload string
		labels               map[string]string
		want                 []string
	}{
		{"a named target", "Deployment", "web", nil, []string{"rolling", "web-apart"}},
		{"a StatefulSet of that name is not it", "StatefulSet", "web", nil, []string{"rolling"}},
		{"a workload the targetSelector selects", "StatefulSet", "cart", map[string]string{"team": "checkout"}, []string{"by-team", "rolling"}},
		{"an unrelated workload", "Deployment", "batch", map[string]string{"team": "data"}, []string{"rolling"}},
	}
	for _, tc := range workloads {
		t.Run(tc.name, func(t *testing.T) {
			got := names(in.WorkloadChange("shop", pgv1.TargetRef{Kind: pgv1.WorkloadKind(tc.kind), Name: tc.workload}, tc.labels))
			if !equalStrings(got, tc.want) {
				t.Errorf("concerned %v, want %v", got, tc.want)
			}
		})
	}

	in.Forget(types.NamespacedName{Namespace: "shop", Name: "rolling"})
	if got := names(in.PodChange("shop", nil, map[string]string{"app": "batch"})); len(got) != 0 {
		t.Errorf("a forgotten migration is still told: %v", got)
	}
}

// A migration not settled, or being deleted, depends on everything in its
// namespace; one known keeps its interest while it is looked at again.
func TestOnlySettledMigrationsNarrowWhatConcernsThem(t *testing.T) {
	s := settledScope("web-apart", pgv1.PlacementMigrationSpec{Targets: []pgv1.TargetRef{{Kind: pgv1.KindDeployment, Name: "web"}}}, placement.Constraint{})
	at := func(stage pgv1.Stage) func(*pgv1.PlacementMigration) {
		return func(pm *pgv1.PlacementMigration) { pm.Status.Targets[0].Verified = &pgv1.StageMilestone{Stage: stage} }
	}
	for _, c := range []struct {
		name   string
		record func(*pgv1.PlacementMigration)
	}{
		{"nothing verified yet (waiting for capacity, blocked)", func(pm *pgv1.PlacementMigration) { pm.Status.Targets[0].Verified = nil }},
		{"the soft stage verified, soaking", at(pgv1.StageSoft)},
		{"a stage in flight", func(pm *pgv1.PlacementMigration) {
			pm.Status.Operation = &pgv1.Operation{Action: pgv1.ActionApplyStage, Stage: pgv1.StageHard}
		}},
		{"a rollback in flight", func(pm *pgv1.PlacementMigration) {
			pm.Status.Operation = &pgv1.Operation{Action: pgv1.ActionRollBack, Stage: pgv1.StageSoft}
		}},
		{"paused", func(pm *pgv1.PlacementMigration) { pm.Spec.Paused = true }},
		{"a spec not observed yet", func(pm *pgv1.PlacementMigration) { pm.Generation++ }},
	} {
		before := s.pm.DeepCopy()
		c.record(s.pm)
		if s.interestOf().Settled {
			t.Errorf("%s: narrows what concerns it", c.name)
		}
		s.pm = before
	}
	if !s.interestOf().Settled {
		t.Fatal("a Succeeded migration does not narrow what concerns it")
	}
	s.pm.Status.Halt = &pgv1.Halt{Outcome: pgv1.HaltRolledBack, Generation: s.pm.Generation}
	s.pm.Status.Targets[0].Verified = nil
	if !s.interestOf().Settled {
		t.Fatal("a halted migration does not narrow what concerns it")
	}
	now := metav1.Now()
	s.pm.DeletionTimestamp = &now
	if s.interestOf().Settled {
		t.Error("a migration being deleted narrows what concerns it")
	}

	in := clusterstate.NewRouter(nil)
	key := types.NamespacedName{Namespace: "shop", Name: "web-apart"}
	s.pm.DeletionTimestamp = nil
	in.Set(key, s.interestOf())
	in.MarkAtWork(key)
	if got := in.PodChange("shop", nil, map[string]string{"app": "batch"}); len(got) != 0 {
		t.Errorf("looking at a settled migration again widened its interest: %v", names(got))
	}
	other := types.NamespacedName{Namespace: "shop", Name: "rolling"}
	in.MarkAtWork(other)
	if !in.Settled(key) || in.Settled(other) || in.Settled(types.NamespacedName{Namespace: "shop", Name: "unknown"}) {
		t.Error("only a migration known to have settled may wait for a node change")
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A driver's CSIStorageCapacity lives in the driver's namespace but decides
// where claims of every namespace are provisioned: it reaches every
// migration, as a node does; another namespaced object only its own.
func TestStorageCapacityReachesEveryMigration(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := pgv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-apart"}},
		&pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Namespace: "billing", Name: "db-apart"}},
	).Build()
	r := &PlacementMigrationReconciler{Client: c}
	capacity := &storagev1.CSIStorageCapacity{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "fast-zone-a"}}
	now, later := r.concernedBy(context.Background(), capacity)
	if got := requestNames(append(now, later...)); len(got) != 2 {
		t.Fatalf("a storage capacity reaches every migration, got %v", got)
	}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "data"}}
	now, later = r.concernedBy(context.Background(), claim)
	if got := requestNames(append(now, later...)); len(got) != 1 || got[0] != "web-apart" {
		t.Fatalf("a claim reaches its namespace's migrations, got %v", got)
	}
}
