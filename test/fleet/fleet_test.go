// Package fleet is the fleet suite: incident 000's migration planned,
// applied and watched across two local clusters with different capacity,
// through kubectl placement as a user runs it.
package fleet

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/fleet"
	"github.com/placement-guard/placement-guard/internal/plugin"
	"github.com/placement-guard/placement-guard/test/localfleet"
)

const repoRoot = "../.."

// placement runs kubectl placement against the fleet's kubeconfig.
func placement(t *testing.T, f *localfleet.Fleet, args ...string) (string, int) {
	t.Helper()
	var out, errOut strings.Builder
	code := plugin.Main(append([]string{"--kubeconfig", f.Kubeconfig}, args...),
		genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	if errOut.Len() > 0 {
		t.Logf("kubectl placement %s: %s", strings.Join(args, " "), errOut.String())
	}
	return out.String(), code
}

func planFleet(t *testing.T, f *localfleet.Fleet, manifest string) (plugin.FleetPlan, int) {
	t.Helper()
	out, code := placement(t, f, "--contexts", "eu,us,down", "plan", "-f", manifest, "-o", "json", "--cluster-timeout", "20s")
	var plan plugin.FleetPlan
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	return plan, code
}

func rowOf(t *testing.T, plan plugin.FleetPlan, cluster string) plugin.FleetRow {
	t.Helper()
	for _, r := range plan.Rows {
		if r.Cluster == cluster {
			return r
		}
	}
	t.Fatalf("no row for %s in %+v", cluster, plan.Rows)
	return plugin.FleetRow{}
}

func hazardTypes(hs []pgv1.Hazard) string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Type+"/"+string(h.Severity))
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// settled waits until the operator's status is about the migration's
// current spec and done says it is where the test expects.
func settled(t *testing.T, m *localfleet.Member, done func(*pgv1.PlacementMigration) bool) *pgv1.PlacementMigration {
	t.Helper()
	pm := &pgv1.PlacementMigration{}
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := m.Client.Get(ctx, client.ObjectKey{Namespace: localfleet.Namespace, Name: "graphdb-apart-from-search"}, pm); err != nil {
			return false, err
		}
		return pm.Status.ObservedGeneration == pm.Generation && done(pm), nil
	})
	if err != nil {
		t.Fatalf("%s: the migration never got there (phase %s, conditions %+v): %v", m.Name, pm.Status.Phase, pm.Status.Conditions, err)
	}
	return pm
}

// The fleet of incident 000: eu has one data node, us two. plan's matrix
// says what the operator in each then decides (a dry run records it), the
// change applied to both succeeds in us and waits in eu, untouched, and
// status across the contexts says so; a context whose server is down is a
// row of its own every time.
func TestIncident000AcrossAFleet(t *testing.T) {
	ctx := context.Background()
	f, err := localfleet.Start(ctx, repoRoot, localfleet.Spec{Name: "eu", DataNodes: 1}, localfleet.Spec{Name: "us", DataNodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "https://" + l.Addr().String()
	l.Close()
	eu := f.Member("eu")
	if err := f.AddContext("down", &clientcmdapi.Cluster{Server: down, CertificateAuthorityData: eu.Cluster.Config.CAData},
		&clientcmdapi.AuthInfo{ClientCertificateData: eu.Cluster.Config.CertData, ClientKeyData: eu.Cluster.Config.KeyData}); err != nil {
		t.Fatal(err)
	}
	pm, err := localfleet.Migration(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	manifest := writeManifest(t, pm)

	// The matrix before anything is applied. The target pods must be older
	// than the migration's minPodAge for us to proceed: wait for that.
	var plan plugin.FleetPlan
	var code int
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		plan, code = planFleet(t, f, manifest)
		return rowOf(t, plan, "us").Outcome != "Waiting", nil
	}); err != nil {
		t.Fatalf("us never stopped waiting for its pods: %+v", plan.Rows)
	}
	if code != plugin.ExitHazards || plan.Worst != fleet.Unknown {
		t.Errorf("exit %d, worst %s: a cluster that cannot be asked fails the plan", code, plan.Worst)
	}
	euRow, usRow, downRow := rowOf(t, plan, "eu"), rowOf(t, plan, "us"), rowOf(t, plan, "down")
	if euRow.Outcome != "WaitingForCapacity" || euRow.Level != fleet.Warn || euRow.Capacity != "1/2" ||
		usRow.Outcome != "Proceeds" || usRow.Level != fleet.OK || usRow.Capacity != "2/2" ||
		downRow.Level != fleet.Unknown || !strings.Contains(downRow.Error, "connection refused") {
		t.Fatalf("matrix: %+v", plan.Rows)
	}
	if !strings.HasPrefix(euRow.KubernetesVersion, "v1.") || euRow.KubernetesVersion != usRow.KubernetesVersion {
		t.Errorf("versions %q and %q", euRow.KubernetesVersion, usRow.KubernetesVersion)
	}

	// A dry run in each cluster records the operator's decision.
	dry := pm.DeepCopy()
	dry.Spec.DryRun = true
	for _, m := range f.Members {
		if err := m.Client.Create(ctx, dry.DeepCopy()); err != nil {
			t.Fatal(err)
		}
	}
	euDry := settled(t, eu, func(pm *pgv1.PlacementMigration) bool { return pm.Status.Phase == pgv1.PhaseWaitingForCapacity })
	usDry := settled(t, f.Member("us"), func(pm *pgv1.PlacementMigration) bool { return pm.Status.Phase == pgv1.PhasePlanned })
	if capacity := meta.FindStatusCondition(euDry.Status.Conditions, pgv1.ConditionCapacityAvailable); capacity == nil || capacity.Reason != euRow.Reason {
		t.Errorf("eu: the operator's capacity condition %+v, the plan's reason %q", capacity, euRow.Reason)
	}
	if hazardTypes(euDry.Status.Hazards) != hazardTypes(euRow.Hazards) || hazardTypes(usDry.Status.Hazards) != hazardTypes(usRow.Hazards) {
		t.Errorf("hazards: eu operator %q plan %q; us operator %q plan %q", hazardTypes(euDry.Status.Hazards), hazardTypes(euRow.Hazards),
			hazardTypes(usDry.Status.Hazards), hazardTypes(usRow.Hazards))
	}
	if got, want := len(usDry.Status.Plan), len(usRow.Recreates); got == 0 || want == 0 || usDry.Status.Plan[0].RecreatesCount != int32(usRow.Recreates[0].Pods) {
		t.Errorf("us: the operator plans %+v, the matrix recreates %+v", usDry.Status.Plan, usRow.Recreates)
	}

	// The change itself, to both: us succeeds, eu waits and leaves the
	// graph DB alone.
	for _, m := range f.Members {
		live := &pgv1.PlacementMigration{}
		if err := m.Client.Get(ctx, client.ObjectKeyFromObject(pm), live); err != nil {
			t.Fatal(err)
		}
		live.Spec.DryRun = false
		if err := m.Client.Update(ctx, live); err != nil {
			t.Fatal(err)
		}
	}
	settled(t, f.Member("us"), func(pm *pgv1.PlacementMigration) bool { return pm.Status.Phase == pgv1.PhaseSucceeded })
	settled(t, eu, func(pm *pgv1.PlacementMigration) bool { return pm.Status.Phase == pgv1.PhaseWaitingForCapacity })
	var graph corev1.PodTemplateSpec
	{
		d := &appsv1.Deployment{}
		if err := eu.Client.Get(ctx, client.ObjectKey{Namespace: localfleet.Namespace, Name: "graphdb"}, d); err != nil {
			t.Fatal(err)
		}
		graph = d.Spec.Template
		if d.Generation != 1 || graph.Spec.Affinity != nil {
			t.Errorf("eu's graph DB was changed while its migration waits: generation %d, affinity %+v", d.Generation, graph.Spec.Affinity)
		}
	}

	out, code := placement(t, f, "--contexts", "eu,us,down", "status", "graphdb-apart-from-search", "-o", "json", "--cluster-timeout", "20s")
	var st plugin.FleetStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	if code != plugin.ExitHazards || len(st.Rows) != 3 ||
		st.Rows[0].Cluster != "eu" || st.Rows[0].Phase != string(pgv1.PhaseWaitingForCapacity) || !st.Rows[0].Current || st.Rows[0].Reason == "" ||
		st.Rows[1].Cluster != "us" || st.Rows[1].Phase != string(pgv1.PhaseSucceeded) || !st.Rows[1].Current ||
		st.Rows[2].Cluster != "down" || !strings.Contains(st.Rows[2].Error, "connection refused") {
		t.Errorf("status across the fleet: exit %d\n%s", code, out)
	}
	plan, _ = planFleet(t, f, manifest)
	if r := rowOf(t, plan, "us"); r.Outcome != "Reached" || r.Level != fleet.OK {
		t.Errorf("us after success: %+v", r)
	}
	if r := rowOf(t, plan, "eu"); r.Outcome != "WaitingForCapacity" {
		t.Errorf("eu still waits: %+v", r)
	}
}

func writeManifest(t *testing.T, pm *pgv1.PlacementMigration) string {
	t.Helper()
	pm = pm.DeepCopy()
	pm.APIVersion, pm.Kind = pgv1.GroupVersion.String(), "PlacementMigration"
	data, err := yaml.Marshal(pm)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "migration.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
