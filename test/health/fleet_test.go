package health

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	lua "github.com/yuin/gopher-lua"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// The fleet tools' views of one migration: what gates a wave. Flux's view
// comes from Flux's own evaluator in test/gates. OCM's and Karmada's come
// from cel-go and gopher-lua, the libraries their agents evaluate rules
// and scripts with: their own Go modules (open-cluster-management.io/*,
// github.com/karmada-io/*) are not served by the module proxy this project
// builds from.
type views struct {
	argo        string        // Argo CD health, by config/argocd/health.lua
	kstatus     status.Status // kubectl wait, Helm
	progressing bool          // OCM's manifest condition, by the ManifestWork's rules
	degraded    bool
	karmada     bool // Karmada's health interpretation
}

// readers loads the shipped configurations once.
type readers struct {
	argoScript         string
	karmadaScript      string
	karmadaAggregation string
	ocmRules           map[string]cel.Program
	ocmPaths           map[string]string
}

func loadReaders(t *testing.T) *readers {
	t.Helper()
	r := &readers{ocmRules: map[string]cel.Program{}, ocmPaths: map[string]string{}}
	script, err := os.ReadFile(filepath.Join("..", "..", "config", "argocd", "health.lua"))
	if err != nil {
		t.Fatal(err)
	}
	r.argoScript = string(script)

	var karmada struct {
		Spec struct {
			Target struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			} `json:"target"`
			Customizations struct {
				HealthInterpretation struct {
					LuaScript string `json:"luaScript"`
				} `json:"healthInterpretation"`
				StatusAggregation struct {
					LuaScript string `json:"luaScript"`
				} `json:"statusAggregation"`
			} `json:"customizations"`
		} `json:"spec"`
	}
	readFleetYAML(t, "karmada-interpreter.yaml", &karmada)
	if karmada.Spec.Target.APIVersion != pgv1.GroupVersion.String() || karmada.Spec.Target.Kind != "PlacementMigration" {
		t.Fatalf("the Karmada customization targets %+v", karmada.Spec.Target)
	}
	r.karmadaScript = karmada.Spec.Customizations.HealthInterpretation.LuaScript
	r.karmadaAggregation = karmada.Spec.Customizations.StatusAggregation.LuaScript

	var work struct {
		Spec struct {
			Workload struct {
				Manifests []map[string]any `json:"manifests"`
			} `json:"workload"`
			ManifestConfigs []struct {
				ResourceIdentifier struct {
					Group, Resource, Name, Namespace string
				} `json:"resourceIdentifier"`
				FeedbackRules []struct {
					JSONPaths []struct{ Name, Path string } `json:"jsonPaths"`
				} `json:"feedbackRules"`
				ConditionRules []struct {
					Condition      string   `json:"condition"`
					CELExpressions []string `json:"celExpressions"`
				} `json:"conditionRules"`
			} `json:"manifestConfigs"`
		} `json:"spec"`
	}
	readFleetYAML(t, "ocm-manifestwork.yaml", &work)
	mc := work.Spec.ManifestConfigs[0]
	m := work.Spec.Workload.Manifests[0]["metadata"].(map[string]any)
	if id := mc.ResourceIdentifier; id.Group != pgv1.GroupVersion.Group || id.Resource != "placementmigrations" || id.Name != m["name"] || id.Namespace != m["namespace"] {
		t.Fatalf("the ManifestWork's rules name %+v, not the migration it carries (%v)", id, m)
	}
	for _, p := range mc.FeedbackRules[0].JSONPaths {
		r.ocmPaths[p.Name] = p.Path
	}
	env, err := cel.NewEnv(cel.Variable("object", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	for _, rule := range mc.ConditionRules {
		if len(rule.CELExpressions) != 1 {
			t.Fatalf("rule %s: one expression expected", rule.Condition)
		}
		ast, iss := env.Compile(rule.CELExpressions[0])
		if iss.Err() != nil {
			t.Fatalf("rule %s: %v", rule.Condition, iss.Err())
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		r.ocmRules[rule.Condition] = prg
	}
	if r.ocmRules["Progressing"] == nil || r.ocmRules["Degraded"] == nil {
		t.Fatalf("the ManifestWork sets %v, want Progressing and Degraded", r.ocmRules)
	}
	return r
}

func readFleetYAML(t *testing.T, name string, into any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "fleet", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// of reads a migration as every fleet tool does.
func (r *readers) of(t *testing.T, pm *pgv1.PlacementMigration) views {
	t.Helper()
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pm)
	if err != nil {
		t.Fatal(err)
	}
	var v views
	v.argo, _ = runHealth(t, r.argoScript, pm)
	res, err := status.Compute(&unstructured.Unstructured{Object: raw})
	if err != nil {
		t.Fatal(err)
	}
	v.kstatus = res.Status
	v.progressing = r.rule(t, "Progressing", raw)
	v.degraded = r.rule(t, "Degraded", raw)
	v.karmada = r.karmadaHealth(t, raw)
	return v
}

func (r *readers) rule(t *testing.T, condition string, raw map[string]any) bool {
	t.Helper()
	out, _, err := r.ocmRules[condition].Eval(map[string]any{"object": raw})
	if err != nil {
		t.Fatalf("OCM rule %s: %v", condition, err)
	}
	b, ok := out.Value().(bool)
	if !ok {
		t.Fatalf("OCM rule %s gave %v, not a bool", condition, out)
	}
	return b
}

// karmadaHealth calls InterpretHealth as Karmada's interpreter does: the
// observed object as a Lua table, a boolean back.
func (r *readers) karmadaHealth(t *testing.T, raw map[string]any) bool {
	t.Helper()
	L := lua.NewState()
	defer L.Close()
	if err := L.DoString(r.karmadaScript); err != nil {
		t.Fatal(err)
	}
	if err := L.CallByParam(lua.P{Fn: L.GetGlobal("InterpretHealth"), NRet: 1, Protect: true}, toLua(L, raw)); err != nil {
		t.Fatalf("InterpretHealth: %v", err)
	}
	b, ok := L.Get(-1).(lua.LBool)
	if !ok {
		t.Fatalf("InterpretHealth returned %s", L.Get(-1).Type())
	}
	return bool(b)
}

// feedback is what OCM's work agent reports for a path: kubectl's JSONPath
// from the object's root, one scalar (open-cluster-management-io/ocm,
// pkg/work/spoke/statusfeedback/reader.go).
func feedback(t *testing.T, path string, raw map[string]any) string {
	t.Helper()
	j := jsonpath.New("feedback").AllowMissingKeys(true)
	if err := j.Parse("{" + path + "}"); err != nil {
		t.Fatalf("path %s: %v", path, err)
	}
	results, err := j.FindResults(raw)
	if err != nil {
		t.Fatalf("path %s: %v", path, err)
	}
	if len(results) == 0 || len(results[0]) == 0 {
		return ""
	}
	if len(results[0]) > 1 {
		t.Fatalf("path %s matches %d values; the agent takes one scalar", path, len(results[0]))
	}
	return fmt.Sprint(results[0][0].Interface())
}

// Every tool reads the same verdict from a migration: healthy (the wave may
// go on) only when it succeeded for its current spec, failed when it is
// Stalled, working otherwise, and never healthy on a success for an older
// spec (argo-cd#29410's case).
func TestFleetToolsAgreeOnEveryPhase(t *testing.T) {
	r := loadReaders(t)
	for _, tc := range []struct {
		phase    pgv1.Phase
		observed int64
	}{
		{pgv1.PhasePending, 2}, {pgv1.PhaseWaitingForCapacity, 2}, {pgv1.PhaseApplyingSoft, 2}, {pgv1.PhaseSoaking, 2},
		{pgv1.PhaseApplyingHard, 2}, {pgv1.PhaseVerifying, 2}, {pgv1.PhaseRollingBack, 2}, {pgv1.PhasePaused, 2},
		{pgv1.PhaseSucceeded, 2}, {pgv1.PhasePlanned, 2},
		{pgv1.PhaseBlocked, 2}, {pgv1.PhaseRolledBack, 2}, {pgv1.PhaseFailed, 2}, {pgv1.PhaseDegraded, 2},
		{pgv1.PhaseSucceeded, 1}, {pgv1.PhaseBlocked, 1}, {"", 0},
	} {
		t.Run(fmt.Sprintf("%s/observed-%d", tc.phase, tc.observed), func(t *testing.T) {
			pm := MigrationIn(tc.phase, tc.observed)
			if tc.phase == "" {
				pm.Status = pgv1.PlacementMigrationStatus{}
			}
			v := r.of(t, pm)
			current := tc.observed == pm.Generation
			healthy := current && (tc.phase == pgv1.PhaseSucceeded || tc.phase == pgv1.PhasePlanned)
			stalled := current && (tc.phase == pgv1.PhaseBlocked || tc.phase == pgv1.PhaseRolledBack || tc.phase == pgv1.PhaseFailed || tc.phase == pgv1.PhaseDegraded)
			want := views{argo: "Progressing", kstatus: status.InProgressStatus, progressing: true}
			switch {
			case healthy:
				want = views{argo: "Healthy", kstatus: status.CurrentStatus, karmada: true}
			case stalled:
				// Progressing stays True beside Degraded: a
				// ManifestWorkReplicaSet calls that Failed and stops.
				want = views{argo: "Degraded", kstatus: status.FailedStatus, progressing: true, degraded: true}
			case current && tc.phase == pgv1.PhasePaused:
				want.argo = "Suspended"
			case tc.phase == "":
				// kstatus alone takes a resource without conditions for
				// Current: the Flux expressions are why Flux waits.
				want.kstatus = status.CurrentStatus
			}
			if v != want {
				t.Errorf("views %+v, want %+v", v, want)
			}
			if got, wantRollout := ocmRollout(v), map[bool]string{true: "Succeeded", false: map[bool]string{true: "Failed", false: "Progressing"}[stalled]}[healthy]; got != wantRollout {
				t.Errorf("a ManifestWorkReplicaSet reads the cluster as %s, want %s", got, wantRollout)
			}
		})
	}
}

// ocmRollout is a cluster's status in a ManifestWorkReplicaSet's rollout
// from its work's Progressing and Degraded conditions, as OCM v1.1.0 and
// later decide it (open-cluster-management-io/ocm,
// manifestworkreplicaset_deploy_reconcile.go, clusterRolloutStatusFunc).
// Restated here because OCM's module is not served by the module proxy.
func ocmRollout(v views) string {
	switch {
	case v.progressing && v.degraded:
		return "Failed"
	case v.progressing:
		return "Progressing"
	default:
		return "Succeeded"
	}
}

// The ManifestWork's feedback paths each give one scalar the hub shows.
func TestOCMFeedbackPaths(t *testing.T) {
	r := loadReaders(t)
	pm := MigrationIn(pgv1.PhaseWaitingForCapacity, 2)
	pm.Status.Stage = pgv1.StageSoft
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pm)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"phase": "WaitingForCapacity", "stage": "Soft", "generation": "2", "observedGeneration": "2", "ready": "False",
		"reason": "WaitingForCapacity", "message": "what the operator says about WaitingForCapacity", "stalled": ""}
	if len(r.ocmPaths) != len(want) {
		t.Errorf("paths %v, want those of %v", r.ocmPaths, want)
	}
	for name, path := range r.ocmPaths {
		if got := feedback(t, path, raw); got != want[name] {
			t.Errorf("%s (%s) = %q, want %q", name, path, got, want[name])
		}
	}
	raw, _ = runtime.DefaultUnstructuredConverter.ToUnstructured(MigrationIn(pgv1.PhaseBlocked, 2))
	if got := feedback(t, r.ocmPaths["stalled"], raw); got != "True" {
		t.Errorf("stalled of a Blocked migration: %q", got)
	}
}

// Flux's waves: each cluster's Kustomization checks the migration's health
// and the later wave depends on the earlier.
type kustomization struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		DependsOn    []struct{ Name string } `json:"dependsOn"`
		HealthChecks []struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Name       string `json:"name"`
		} `json:"healthChecks"`
		HealthCheckExprs []struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			InProgress string `json:"inProgress"`
			Failed     string `json:"failed"`
			Current    string `json:"current"`
		} `json:"healthCheckExprs"`
		KubeConfig *struct{} `json:"kubeConfig"`
	} `json:"spec"`
}

func fluxKustomizations(t *testing.T) []kustomization {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "fleet", "flux-kustomizations.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ks []kustomization
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var k kustomization
		if err := yaml.Unmarshal([]byte(doc), &k); err != nil {
			t.Fatal(err)
		}
		ks = append(ks, k)
	}
	return ks
}

func TestFluxWaves(t *testing.T) {
	ks := fluxKustomizations(t)
	if len(ks) != 2 {
		t.Fatalf("%d Kustomizations, want one per wave", len(ks))
	}
	for i, k := range ks {
		if len(k.Spec.HealthChecks) != 1 || k.Spec.HealthChecks[0].APIVersion != pgv1.GroupVersion.String() ||
			k.Spec.HealthChecks[0].Kind != "PlacementMigration" || k.Spec.KubeConfig == nil ||
			!reflect.DeepEqual(k.Spec.HealthCheckExprs, ks[0].Spec.HealthCheckExprs) {
			t.Errorf("%s checks %+v", k.Metadata.Name, k.Spec.HealthChecks)
		}
		if i > 0 && (len(k.Spec.DependsOn) != 1 || k.Spec.DependsOn[0].Name != ks[i-1].Metadata.Name) {
			t.Errorf("%s depends on %+v, want %s", k.Metadata.Name, k.Spec.DependsOn, ks[i-1].Metadata.Name)
		}
	}
}

// On a real API server: a migration that succeeded is healthy to every
// tool; the spec changing (a sync of a new revision) bumps its generation
// and every tool says it works again until the operator's status catches
// up, so the next wave cannot start on the old success.
func TestGenerationBumpAfterSuccessReopensTheGate(t *testing.T) {
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "..", "config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest (KUBEBUILDER_ASSETS=%q): %v", os.Getenv("KUBEBUILDER_ASSETS"), err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	scheme := runtime.NewScheme()
	if err := pgv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := loadReaders(t)
	pm := &pgv1.PlacementMigration{
		ObjectMeta: metav1.ObjectMeta{Name: "graphdb-apart-from-search", Namespace: "default"},
		Spec: pgv1.PlacementMigrationSpec{
			Targets:    []pgv1.TargetRef{{Kind: pgv1.KindDeployment, Name: "graphdb"}},
			Constraint: pgv1.Constraint{PodAntiAffinity: &pgv1.PodAntiAffinityConstraint{TopologyKey: "kubernetes.io/hostname"}},
		},
	}
	if err := c.Create(ctx, pm); err != nil {
		t.Fatal(err)
	}
	// Not yet seen by the operator: no tool may call it done.
	if v := r.of(t, pm); v.argo != "Progressing" || !v.progressing || v.karmada {
		t.Errorf("before the operator's first status: %+v", v)
	}
	succeed := func() {
		t.Helper()
		done := MigrationIn(pgv1.PhaseSucceeded, pm.Generation)
		for i := range done.Status.Conditions {
			done.Status.Conditions[i].LastTransitionTime = metav1.Now()
		}
		pm.Status = done.Status
		if err := c.Status().Update(ctx, pm); err != nil {
			t.Fatal(err)
		}
	}
	succeed()
	healthy := views{argo: "Healthy", kstatus: status.CurrentStatus, karmada: true}
	if v := r.of(t, pm); v != healthy {
		t.Fatalf("after success at generation %d: %+v", pm.Generation, v)
	}
	before := pm.Generation
	pm.Spec.Constraint.PodAntiAffinity.TopologyKey = "topology.kubernetes.io/zone"
	if err := c.Update(ctx, pm); err != nil {
		t.Fatal(err)
	}
	if pm.Generation != before+1 || pm.Status.ObservedGeneration != before {
		t.Fatalf("the spec change made generation %d (observed %d), want %d", pm.Generation, pm.Status.ObservedGeneration, before+1)
	}
	if v := r.of(t, pm); v != (views{argo: "Progressing", kstatus: status.InProgressStatus, progressing: true}) {
		t.Errorf("after the spec changed, on the old success: %+v", v)
	}
	succeed()
	if v := r.of(t, pm); v != healthy {
		t.Errorf("after success for the new spec: %+v", v)
	}
}

// Argo CD's waves: RollingSync steps select the Applications by the wave
// label their template gives them, one step per wave, in order.
func TestArgoCDRollingSyncWaves(t *testing.T) {
	var appset struct {
		Spec struct {
			Strategy struct {
				Type        string `json:"type"`
				RollingSync struct {
					Steps []struct {
						MatchExpressions []struct {
							Key      string   `json:"key"`
							Operator string   `json:"operator"`
							Values   []string `json:"values"`
						} `json:"matchExpressions"`
					} `json:"steps"`
				} `json:"rollingSync"`
			} `json:"strategy"`
			Template struct {
				Metadata struct {
					Labels map[string]string `json:"labels"`
				} `json:"metadata"`
			} `json:"template"`
		} `json:"spec"`
	}
	readFleetYAML(t, "argocd-applicationset.yaml", &appset)
	st := appset.Spec.Strategy
	if st.Type != "RollingSync" || len(st.RollingSync.Steps) != 2 {
		t.Fatalf("strategy %+v", st)
	}
	for i, step := range st.RollingSync.Steps {
		m := step.MatchExpressions
		if len(m) != 1 || m[0].Key != "placementguard.io/wave" || m[0].Operator != "In" || !reflect.DeepEqual(m[0].Values, []string{fmt.Sprint(i + 1)}) {
			t.Errorf("step %d selects %+v", i, m)
		}
	}
	if _, ok := appset.Spec.Template.Metadata.Labels["placementguard.io/wave"]; !ok {
		t.Error("the Applications carry no wave label for the steps to select")
	}
}

// The ManifestWorkReplicaSet rolls out exactly the ManifestWork's spec, one
// cluster at a time, stopping at the first failure and never timing out a
// cluster that waits for capacity.
func TestOCMReplicaSetRollsOutTheManifestWork(t *testing.T) {
	var work struct {
		Spec map[string]any `json:"spec"`
	}
	readFleetYAML(t, "ocm-manifestwork.yaml", &work)
	var set struct {
		Spec struct {
			PlacementRefs []struct {
				RolloutStrategy struct {
					Type        string `json:"type"`
					Progressive struct {
						MaxConcurrency   any    `json:"maxConcurrency"`
						MaxFailures      any    `json:"maxFailures"`
						ProgressDeadline string `json:"progressDeadline"`
					} `json:"progressive"`
				} `json:"rolloutStrategy"`
			} `json:"placementRefs"`
			ManifestWorkTemplate map[string]any `json:"manifestWorkTemplate"`
		} `json:"spec"`
	}
	readFleetYAML(t, "ocm-manifestworkreplicaset.yaml", &set)
	if !reflect.DeepEqual(set.Spec.ManifestWorkTemplate, work.Spec) {
		t.Error("the ManifestWorkReplicaSet's template differs from ocm-manifestwork.yaml's spec")
	}
	if len(set.Spec.PlacementRefs) != 1 {
		t.Fatalf("%d placementRefs", len(set.Spec.PlacementRefs))
	}
	st := set.Spec.PlacementRefs[0].RolloutStrategy
	if st.Type != "Progressive" || fmt.Sprint(st.Progressive.MaxConcurrency) != "1" || fmt.Sprint(st.Progressive.MaxFailures) != "0" || st.Progressive.ProgressDeadline != "None" {
		t.Errorf("rollout strategy %+v", st)
	}
}

// The Flux example of docs/gitops.md waits with the same expressions as
// the shipped Kustomizations, which test/gates runs through Flux.
func TestGitOpsDocsShowTheShippedFluxExpressions(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "gitops.md"))
	if err != nil {
		t.Fatal(err)
	}
	e := fluxKustomizations(t)[0].Spec.HealthCheckExprs[0]
	for name, expr := range map[string]string{"inProgress": e.InProgress, "failed": e.Failed, "current": e.Current} {
		folded := strings.Join(strings.Fields(string(doc)), " ")
		if !strings.Contains(folded, strings.Join(strings.Fields(expr), " ")) {
			t.Errorf("docs/gitops.md does not show the %s expression of config/fleet/flux-kustomizations.yaml: %s", name, expr)
		}
	}
}
