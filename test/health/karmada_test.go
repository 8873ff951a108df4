package health

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	lua "github.com/yuin/gopher-lua"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// karmadaScripts are the interpreter's reflection and aggregation, run the
// way Karmada's interpreter runs them: ReflectStatus on each member's
// object, AggregateStatus on the template with the members' reflections.
// Karmada's own interpreter package is not served by the module proxy;
// gopher-lua is the Lua it embeds, and fromLua encodes tables as it does
// (an empty table is an empty list).
type karmadaScripts struct{ reflection, aggregation string }

func loadKarmadaScripts(t *testing.T) karmadaScripts {
	t.Helper()
	var c struct {
		Spec struct {
			Customizations struct {
				StatusReflection  struct{ LuaScript string } `json:"statusReflection"`
				StatusAggregation struct{ LuaScript string } `json:"statusAggregation"`
			} `json:"customizations"`
		} `json:"spec"`
	}
	readFleetYAML(t, "karmada-interpreter.yaml", &c)
	return karmadaScripts{reflection: c.Spec.Customizations.StatusReflection.LuaScript, aggregation: c.Spec.Customizations.StatusAggregation.LuaScript}
}

// member is one cluster's copy of the template: the migration in a phase,
// updated to a template generation (Karmada's annotation) or not.
type member struct {
	cluster            string
	phase              pgv1.Phase
	templateGeneration int64
}

func (k karmadaScripts) aggregate(t *testing.T, template map[string]any, members []member) map[string]any {
	t.Helper()
	L := lua.NewState()
	defer L.Close()
	if err := L.DoString(k.reflection); err != nil {
		t.Fatal(err)
	}
	if err := L.DoString(k.aggregation); err != nil {
		t.Fatal(err)
	}
	items := L.NewTable()
	for _, m := range members {
		pm := MigrationIn(m.phase, 2)
		pm.Annotations = map[string]string{"resourcetemplate.karmada.io/generation": strconv.FormatInt(m.templateGeneration, 10)}
		for i := range pm.Status.Conditions {
			pm.Status.Conditions[i].LastTransitionTime = metav1.Now()
		}
		raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pm)
		if err != nil {
			t.Fatal(err)
		}
		if err := L.CallByParam(lua.P{Fn: L.GetGlobal("ReflectStatus"), NRet: 1, Protect: true}, toLua(L, raw)); err != nil {
			t.Fatalf("ReflectStatus: %v", err)
		}
		item := L.NewTable()
		item.RawSetString("clusterName", lua.LString(m.cluster))
		item.RawSetString("status", L.Get(-1))
		L.Pop(1)
		items.Append(item)
	}
	if err := L.CallByParam(lua.P{Fn: L.GetGlobal("AggregateStatus"), NRet: 1, Protect: true}, toLua(L, template), items); err != nil {
		t.Fatalf("AggregateStatus: %v", err)
	}
	out, ok := fromLua(L.Get(-1)).(map[string]any)
	if !ok {
		t.Fatalf("AggregateStatus returned %s", L.Get(-1).Type())
	}
	return emptyAsIn(out, template).(map[string]any)
}

// emptyAsIn turns an empty list back into an empty object where the object
// handed to the script had one, as Karmada's interpreter does with the
// objects it passed in as references.
func emptyAsIn(out, ref any) any {
	switch o := out.(type) {
	case []any:
		if r, ok := ref.(map[string]any); ok && len(o) == 0 {
			return r
		}
	case map[string]any:
		r, _ := ref.(map[string]any)
		for k, v := range o {
			o[k] = emptyAsIn(v, r[k])
		}
	}
	return out
}

// fromLua encodes a Lua value as Karmada's interpreter does: a table with
// keys 1..n (or none) is a list, any other table an object.
func fromLua(v lua.LValue) any {
	switch v := v.(type) {
	case *lua.LTable:
		if n := v.MaxN(); n > 0 || v.Len() == 0 && isEmpty(v) {
			list := make([]any, 0, n)
			for i := 1; i <= n; i++ {
				list = append(list, fromLua(v.RawGetInt(i)))
			}
			return list
		}
		m := map[string]any{}
		v.ForEach(func(k, e lua.LValue) { m[k.String()] = fromLua(e) })
		return m
	case lua.LString:
		return string(v)
	case lua.LBool:
		return bool(v)
	case lua.LNumber:
		if float64(v) == float64(int64(v)) {
			return int64(v)
		}
		return float64(v)
	default:
		return nil
	}
}

func isEmpty(t *lua.LTable) bool {
	k, _ := t.Next(lua.LNil)
	return k == lua.LNil
}

// On the Karmada API server the template is what Argo CD, Flux and
// kstatus read: its aggregated status must be accepted by the CRD and tell
// a wave what the members say, and must not move to a new generation until
// every member runs it.
func TestKarmadaAggregatesMembersOntoTheTemplate(t *testing.T) {
	k := loadKarmadaScripts(t)
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "..", "config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest (KUBEBUILDER_ASSETS=%q): %v", os.Getenv("KUBEBUILDER_ASSETS"), err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	dc := dynamic.NewForConfigOrDie(cfg)
	migrations := dc.Resource(schema.GroupVersionResource{Group: pgv1.GroupVersion.Group, Version: pgv1.GroupVersion.Version, Resource: "placementmigrations"}).Namespace("default")
	script, err := os.ReadFile(filepath.Join("..", "..", "config", "argocd", "health.lua"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	for i, tc := range []struct {
		name    string
		members []member
		// what the template says once aggregated: whether its status is
		// about the template's generation, the phase, and the verdicts.
		current bool
		phase   pgv1.Phase
		argo    string
		kstatus status.Status
	}{
		{"every member succeeded for the template", []member{{"eu-1", pgv1.PhaseSucceeded, 2}, {"us-1", pgv1.PhaseSucceeded, 2}},
			true, pgv1.PhaseSucceeded, "Healthy", status.CurrentStatus},
		{"a member still runs the template's previous generation", []member{{"eu-1", pgv1.PhaseSucceeded, 2}, {"us-1", pgv1.PhaseSucceeded, 1}},
			false, "", "Progressing", status.InProgressStatus},
		{"a member waits for capacity", []member{{"eu-1", pgv1.PhaseSucceeded, 2}, {"us-1", pgv1.PhaseWaitingForCapacity, 2}},
			true, pgv1.PhaseWaitingForCapacity, "Progressing", status.InProgressStatus},
		{"a member is Stalled", []member{{"eu-1", pgv1.PhaseRolledBack, 2}, {"us-1", pgv1.PhaseApplyingSoft, 2}},
			true, pgv1.PhaseRolledBack, "Degraded", status.FailedStatus},
	} {
		t.Run(tc.name, func(t *testing.T) {
			template := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": pgv1.GroupVersion.String(), "kind": "PlacementMigration",
				"metadata": map[string]any{"name": fmt.Sprintf("graphdb-%d", i), "namespace": "default"},
				"spec": map[string]any{
					"targets":    []any{map[string]any{"kind": "Deployment", "name": "graphdb"}},
					"constraint": map[string]any{"podAntiAffinity": map[string]any{"topologyKey": "kubernetes.io/hostname"}},
				},
			}}
			created, err := migrations.Create(ctx, template, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// Two generations: the template was changed once after it was
			// propagated.
			created.Object["spec"].(map[string]any)["constraint"].(map[string]any)["podAntiAffinity"].(map[string]any)["topologyKey"] = "topology.kubernetes.io/zone"
			updated, err := migrations.Update(ctx, created, metav1.UpdateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if updated.GetGeneration() != 2 {
				t.Fatalf("generation %d", updated.GetGeneration())
			}
			aggregated := &unstructured.Unstructured{Object: k.aggregate(t, updated.Object, tc.members)}
			written, err := migrations.UpdateStatus(ctx, aggregated, metav1.UpdateOptions{FieldValidation: "Strict"})
			if err != nil {
				t.Fatalf("the API server refused the aggregated status: %v", err)
			}
			observed, _, _ := unstructured.NestedInt64(written.Object, "status", "observedGeneration")
			if got := observed == written.GetGeneration(); got != tc.current {
				t.Errorf("status about generation %d of %d, want current=%v", observed, written.GetGeneration(), tc.current)
			}
			if phase, _, _ := unstructured.NestedString(written.Object, "status", "phase"); pgv1.Phase(phase) != tc.phase {
				t.Errorf("phase %q, want %q", phase, tc.phase)
			}
			var pm pgv1.PlacementMigration
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(written.Object, &pm); err != nil {
				t.Fatal(err)
			}
			if argo, msg := runHealth(t, string(script), &pm); argo != tc.argo {
				t.Errorf("Argo CD reads %s (%s), want %s", argo, msg, tc.argo)
			}
			res, err := status.Compute(written)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tc.kstatus {
				t.Errorf("kstatus reads %s (%s), want %s", res.Status, res.Message, tc.kstatus)
			}
		})
	}
}
