package health

import (
	"os"
	"path/filepath"
	"testing"

	lua "github.com/yuin/gopher-lua"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

func TestArgoCDHealthOfEveryPhase(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("..", "..", "config", "argocd", "health.lua"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		phase    pgv1.Phase
		observed int64
		want     string
	}{
		{pgv1.PhasePending, 2, "Progressing"},
		{pgv1.PhaseWaitingForCapacity, 2, "Progressing"},
		{pgv1.PhaseApplyingSoft, 2, "Progressing"},
		{pgv1.PhaseSoaking, 2, "Progressing"},
		{pgv1.PhaseApplyingHard, 2, "Progressing"},
		{pgv1.PhaseVerifying, 2, "Progressing"},
		{pgv1.PhaseRollingBack, 2, "Progressing"},
		{pgv1.PhaseSucceeded, 2, "Healthy"},
		{pgv1.PhasePlanned, 2, "Healthy"},
		{pgv1.PhaseBlocked, 2, "Degraded"},
		{pgv1.PhaseRolledBack, 2, "Degraded"},
		{pgv1.PhaseFailed, 2, "Degraded"},
		{pgv1.PhaseDegraded, 2, "Degraded"},
		{pgv1.PhasePaused, 2, "Suspended"},
		// A status written for the previous spec says nothing about this one.
		{pgv1.PhaseSucceeded, 1, "Progressing"},
		{"", 0, "Progressing"},
	} {
		t.Run(string(tc.phase)+"/observed-"+string(rune('0'+tc.observed)), func(t *testing.T) {
			pm := MigrationIn(tc.phase, tc.observed)
			if tc.phase == "" {
				pm.Status = pgv1.PlacementMigrationStatus{}
			}
			status, message := runHealth(t, string(script), pm)
			if status != tc.want {
				t.Fatalf("health %q (%s), want %q", status, message, tc.want)
			}
			if message == "" {
				t.Fatal("the health check must say why")
			}
		})
	}
}

// runHealth runs the script the way Argo CD does: obj is the resource as a
// Lua table, and the script returns a table with status and message.
func runHealth(t *testing.T, script string, pm *pgv1.PlacementMigration) (string, string) {
	t.Helper()
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pm)
	if err != nil {
		t.Fatal(err)
	}
	L := lua.NewState(lua.Options{SkipOpenLibs: false})
	defer L.Close()
	L.SetGlobal("obj", toLua(L, raw))
	if err := L.DoString(script); err != nil {
		t.Fatalf("run health.lua: %v", err)
	}
	ret, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		t.Fatalf("health.lua returned %s, want a table", L.Get(-1).Type())
	}
	return lua.LVAsString(ret.RawGetString("status")), lua.LVAsString(ret.RawGetString("message"))
}

func toLua(L *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := L.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(L, e))
		}
		return t
	case []any:
		t := L.NewTable()
		for _, e := range v {
			t.Append(toLua(L, e))
		}
		return t
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case nil:
		return lua.LNil
	default:
		return lua.LString("")
	}
}

// A migration being deleted reverts what it applied (its revert finalizer)
// before it goes: Argo CD must not call it Healthy or Degraded meanwhile,
// whatever its last status says.
func TestArgoCDHealthOfAMigrationBeingDeleted(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("..", "..", "config", "argocd", "health.lua"))
	if err != nil {
		t.Fatal(err)
	}
	for _, phase := range []pgv1.Phase{pgv1.PhaseSucceeded, pgv1.PhaseRolledBack, pgv1.PhaseApplyingHard} {
		pm := MigrationIn(phase, 2)
		now := metav1.Now()
		pm.DeletionTimestamp = &now
		pm.Finalizers = []string{pgv1.RevertFinalizer}
		if got, msg := runHealth(t, string(script), pm); got != "Progressing" {
			t.Errorf("%s being deleted: %s (%s), want Progressing", phase, got, msg)
		}
	}
}
