// Package policies checks the admission policies of config/policies on a
// real API server (envtest): what they admit and refuse, and that the API
// server type-checks their CEL without a warning.
package policies

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

const ns = "shop"

func TestMigrationRequiresPatchOnTargets(t *testing.T) {
	cfg, scheme, stop := startWithPolicy(t, "migration-requires-patch.yaml")
	defer stop()
	ctx := context.Background()
	admin := mustClient(t, cfg, scheme, "")

	// alice may manage migrations but not patch workloads; bob may do both.
	must(t, admin.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "migrations"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{pgv1.GroupVersion.Group}, Resources: []string{"placementmigrations"}, Verbs: []string{"get", "create", "update", "patch", "delete"}}}}))
	must(t, admin.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "patch-workloads"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets"}, Verbs: []string{"patch"}}}}))
	bind(t, admin, "alice", "migrations")
	bind(t, admin, "bob", "migrations")
	bind(t, admin, "bob", "patch-workloads")
	alice, bob := mustClient(t, cfg, scheme, "alice"), mustClient(t, cfg, scheme, "bob")

	named := func(name string) *pgv1.PlacementMigration {
		return &pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: pgv1.PlacementMigrationSpec{
			Targets:    []pgv1.TargetRef{{Kind: pgv1.KindDeployment, Name: "web"}, {Kind: pgv1.KindStatefulSet, Name: "db"}},
			Constraint: pgv1.Constraint{PodAntiAffinity: &pgv1.PodAntiAffinityConstraint{TopologyKey: corev1.LabelHostname}},
		}}
	}

	// The API server loads a new policy asynchronously: wait until it acts.
	var refusal error
	deadline := time.Now().Add(30 * time.Second)
	for {
		refusal = alice.Create(ctx, named("by-alice"))
		if refusal != nil || time.Now().After(deadline) {
			break
		}
		must(t, admin.Delete(ctx, named("by-alice")))
		time.Sleep(200 * time.Millisecond)
	}
	if refusal == nil || !strings.Contains(refusal.Error(), "user alice may not patch every Deployment this migration targets (web) in namespace shop") {
		t.Fatalf("alice, who may not patch the targets, must be refused with their names: %v", refusal)
	}

	if err := bob.Create(ctx, named("by-bob")); err != nil {
		t.Fatalf("bob may patch the targets and must be admitted: %v", err)
	}

	selector := named("selected-by-alice")
	selector.Spec.Targets = nil
	selector.Spec.TargetSelector = &pgv1.TargetSelector{Kinds: []pgv1.WorkloadKind{pgv1.KindDeployment}, Selector: *pgv1.Labels(map[string]string{"team": "shop"})}
	err := alice.Create(ctx, selector)
	if err == nil || !strings.Contains(err.Error(), "user alice may not patch every Deployment in namespace shop") {
		t.Fatalf("a targetSelector needs patch on the kind in the namespace: %v", err)
	}

	byBob := &pgv1.PlacementMigration{}
	must(t, admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "by-bob"}, byBob))
	paused := byBob.DeepCopy()
	paused.Spec.Paused = true
	if err := alice.Update(ctx, paused); err != nil {
		t.Fatalf("pausing changes nothing that is written; alice may: %v", err)
	}
	retargeted := paused.DeepCopy()
	retargeted.Spec.Targets = append(retargeted.Spec.Targets, pgv1.TargetRef{Kind: pgv1.KindDeployment, Name: "api"})
	if err := alice.Update(ctx, retargeted); err == nil || !strings.Contains(err.Error(), "may not patch every Deployment this migration targets (web, api)") {
		t.Fatalf("alice may not widen bob's migration to targets she may not patch: %v", err)
	}
	// carol may patch one Deployment by name: a migration of it alone is
	// admitted, one that adds another is not.
	must(t, admin.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "patch-web"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, ResourceNames: []string{"web"}, Verbs: []string{"patch"}}}}))
	bind(t, admin, "carol", "migrations")
	bind(t, admin, "carol", "patch-web")
	carol := mustClient(t, cfg, scheme, "carol")
	webOnly := named("by-carol")
	webOnly.Spec.Targets = []pgv1.TargetRef{{Kind: pgv1.KindDeployment, Name: "web"}}
	if err := carol.Create(ctx, webOnly); err != nil {
		t.Fatalf("carol may patch Deployment web and must be admitted: %v", err)
	}
	webAndAPI := named("by-carol-2")
	webAndAPI.Spec.Targets = []pgv1.TargetRef{{Kind: pgv1.KindDeployment, Name: "web"}, {Kind: pgv1.KindDeployment, Name: "api"}}
	if err := carol.Create(ctx, webAndAPI); err == nil || !strings.Contains(err.Error(), "(web, api)") {
		t.Fatalf("carol may not patch Deployment api: %v", err)
	}

	reconstrained := paused.DeepCopy()
	reconstrained.Spec.Constraint.PodAntiAffinity.TopologyKey = corev1.LabelTopologyZone
	if err := alice.Update(ctx, reconstrained); err == nil {
		t.Fatal("alice may not change what bob's migration writes into workloads she may not patch")
	}
}

// startWithPolicy starts the API server with the namespace the tests use
// and the policy (and its binding) of config/policies/file.
func startWithPolicy(t *testing.T, file string) (*rest.Config, *runtime.Scheme, func()) {
	t.Helper()
	cfg, scheme, stop := startAPIServer(t)
	admin := mustClient(t, cfg, scheme, "")
	ctx := context.Background()
	policy, binding := readPolicy(t, file)
	for _, obj := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, policy, binding} {
		if err := admin.Create(ctx, obj); err != nil {
			stop()
			t.Fatal(err)
		}
	}
	return cfg, scheme, stop
}

// startAPIServer starts a real kube-apiserver and etcd with the CRD.
func startAPIServer(t *testing.T) (*rest.Config, *runtime.Scheme, func()) {
	t.Helper()
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest (KUBEBUILDER_ASSETS=%q): %v", os.Getenv("KUBEBUILDER_ASSETS"), err)
	}
	stop := func() { _ = env.Stop() }
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		stop()
		t.Fatal(err)
	}
	if err := pgv1.AddToScheme(scheme); err != nil {
		stop()
		t.Fatal(err)
	}
	return cfg, scheme, stop
}

func readPolicy(t *testing.T, file string) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	// The operator's own policies are in operator/, which config/default
	// installs too.
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "policies", file))
	if os.IsNotExist(err) {
		data, err = os.ReadFile(filepath.Join("..", "..", "config", "policies", "operator", file))
	}
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(data), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("want a policy and its binding, found %d documents", len(docs))
	}
	policy, binding := &admissionv1.ValidatingAdmissionPolicy{}, &admissionv1.ValidatingAdmissionPolicyBinding{}
	must(t, yaml.UnmarshalStrict([]byte(docs[0]), policy))
	must(t, yaml.UnmarshalStrict([]byte(docs[1]), binding))
	return policy, binding
}

func bind(t *testing.T, c client.Client, user, role string) {
	t.Helper()
	must(t, c.Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-" + role, Namespace: ns},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
	}))
}

func mustClient(t *testing.T, cfg *rest.Config, scheme *runtime.Scheme, as string) client.Client {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	if as != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: as}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestSteerRoleMayOnlySteer binds the plugin's steer role (patch and
// delete on migrations, nothing on workloads) as config/plugin ships it
// and tries every field of a migration: pause, resume, onDelete, retry
// and delete pass; anything that changes what the operator writes, or how
// carefully, needs patch on the targets.
func TestSteerRoleMayOnlySteer(t *testing.T) {
	cfg, scheme, stop := startWithPolicy(t, "migration-requires-patch.yaml")
	defer stop()
	ctx := context.Background()
	admin := mustClient(t, cfg, scheme, "")
	steer := steerRole(t)
	must(t, admin.Create(ctx, steer))
	bind(t, admin, "sam", steer.Name)
	sam := mustClient(t, cfg, scheme, "sam")

	base := &pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Name: "controllers-apart", Namespace: ns}, Spec: pgv1.PlacementMigrationSpec{
		Targets:      []pgv1.TargetRef{{Kind: pgv1.KindDeployment, Name: "web"}},
		Constraint:   pgv1.Constraint{TopologySpread: &pgv1.TopologySpreadConstraint{TopologyKey: corev1.LabelTopologyZone}},
		FinalStage:   pgv1.StageSoft,
		SoakDuration: &metav1.Duration{Duration: 10 * time.Minute},
		Guards: &pgv1.Guards{MinPodAge: &metav1.Duration{Duration: 5 * time.Minute}, Disruptions: pgv1.DisruptionBlock,
			ProtectedPods: pgv1.Labels(map[string]string{"app": "broker"})},
		DryRun: true,
	}}
	must(t, admin.Create(ctx, base))
	current := func() *pgv1.PlacementMigration {
		pm := &pgv1.PlacementMigration{}
		must(t, admin.Get(ctx, client.ObjectKeyFromObject(base), pm))
		return pm
	}
	// The API server loads a new policy asynchronously: wait until it
	// refuses sam a change of the final stage.
	var refusal error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if refusal = sam.Patch(ctx, current(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"finalStage":"Hard"}}`))); refusal != nil {
			break
		}
		back := current()
		back.Spec.FinalStage = pgv1.StageSoft
		must(t, admin.Update(ctx, back))
	}
	if refusal == nil || !strings.Contains(refusal.Error(), "(it changes spec.finalStage)") {
		t.Fatalf("sam may not make the final stage Hard: %v", refusal)
	}

	// Each change as a merge patch from the object read, as kubectl patch,
	// kubectl edit and the Go clients send it.
	for _, c := range []struct {
		field  string
		change func(*pgv1.PlacementMigrationSpec)
	}{
		{"constraint", func(s *pgv1.PlacementMigrationSpec) { s.Constraint.TopologySpread.MaxSkew = 2 }},
		{"targets", func(s *pgv1.PlacementMigrationSpec) {
			s.Targets = append(s.Targets, pgv1.TargetRef{Kind: pgv1.KindDeployment, Name: "api"})
		}},
		{"capacity", func(s *pgv1.PlacementMigrationSpec) {
			s.Capacity = &pgv1.Capacity{Provision: &pgv1.Provision{Mode: pgv1.ProvisionPlaceholderPods, MaxNodes: ptr.To[int32](1000)}}
		}},
		{"soakDuration", func(s *pgv1.PlacementMigrationSpec) { s.SoakDuration = &metav1.Duration{} }},
		{"stageTimeout", func(s *pgv1.PlacementMigrationSpec) { s.StageTimeout = &metav1.Duration{Duration: 24 * time.Hour} }},
		{"guards", func(s *pgv1.PlacementMigrationSpec) { s.Guards.Disruptions = pgv1.DisruptionIgnore }},
		{"guards", func(s *pgv1.PlacementMigrationSpec) { s.Guards.EvictStuckPods = true }},
		{"guards", func(s *pgv1.PlacementMigrationSpec) { s.Guards.MinPodAge = &metav1.Duration{} }},
		{"guards", func(s *pgv1.PlacementMigrationSpec) { s.Guards.ProtectedPods = nil }},
		{"guards", func(s *pgv1.PlacementMigrationSpec) { s.Guards.MaxRestarts = ptr.To[int32](100) }},
		{"dryRun", func(s *pgv1.PlacementMigrationSpec) { s.DryRun = false }},
	} {
		pm := current()
		patch := client.MergeFrom(pm.DeepCopy())
		c.change(&pm.Spec)
		err := sam.Patch(ctx, pm, patch)
		if err == nil || !strings.Contains(err.Error(), "(it changes spec."+c.field+")") {
			t.Errorf("sam, who may not patch web, changing spec.%s: want refused naming the field, got %v", c.field, err)
		}
	}

	// Steering stays open: a merge patch, as the plugin sends.
	for _, c := range []struct{ name, patch string }{
		{"pause", `{"spec":{"paused":true}}`},
		{"resume", `{"spec":{"paused":null}}`},
		{"retry", `{"metadata":{"annotations":{"` + pgv1.RetryAnnotation + `":"2026-11-25T10:00:00Z"}}}`},
		{"abort's first write", `{"metadata":{"finalizers":["` + pgv1.RevertFinalizer + `"]},"spec":{"onDelete":"Revert"}}`},
		{"onDelete back to Retain", `{"spec":{"onDelete":"Retain"}}`},
	} {
		if err := sam.Patch(ctx, current(), client.RawPatch(types.MergePatchType, []byte(c.patch))); err != nil {
			t.Errorf("the steer role must be able to %s: %v", c.name, err)
		}
	}
	if err := sam.Delete(ctx, current()); err != nil {
		t.Errorf("the steer role must be able to delete (abort): %v", err)
	}
}

// steerRole is the plugin's steer ClusterRole as config/plugin ships it.
func steerRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "plugin", "rbac.yaml"))
	must(t, err)
	for _, doc := range strings.Split(string(data), "\n---\n") {
		role := &rbacv1.ClusterRole{}
		must(t, yaml.Unmarshal([]byte(doc), role))
		if role.Name == "placement-guard-plugin-steer" {
			return role
		}
	}
	t.Fatal("config/plugin/rbac.yaml has no placement-guard-plugin-steer")
	return nil
}
