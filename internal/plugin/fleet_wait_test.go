//go:build unix

package plugin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// regionsKubeconfig writes a kubeconfig whose contexts reach one API
// server, each in the namespace of its name (so that each asks a question
// of its own), plus eu-again (eu's repeat), down (a server nobody listens
// on) and hung (whose credential plugin never answers and records its pid
// in dir).
func regionsKubeconfig(t *testing.T, cfg *rest.Config, dir string, regions ...string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["one"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.Clusters["down"] = &clientcmdapi.Cluster{Server: "https://" + closedPort(t), CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	for _, r := range regions {
		kc.Contexts[r] = &clientcmdapi.Context{Cluster: "one", AuthInfo: "admin", Namespace: r}
	}
	kc.Contexts["eu-again"] = &clientcmdapi.Context{Cluster: "one", AuthInfo: "admin", Namespace: "eu"}
	kc.Contexts["down"] = &clientcmdapi.Context{Cluster: "down", AuthInfo: "admin", Namespace: "eu"}
	plugin := filepath.Join(dir, "hang.sh")
	if err := os.WriteFile(plugin, []byte("#!/bin/sh\necho $$ > \"$0.pid\"\nexec sleep 300\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	kc.AuthInfos["hung"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion: "client.authentication.k8s.io/v1", Command: plugin, InteractiveMode: clientcmdapi.NeverExecInteractiveMode}}
	kc.Contexts["hung"] = &clientcmdapi.Context{Cluster: "one", AuthInfo: "hung", Namespace: "us"}
	kc.CurrentContext = regions[0]
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// migrationIn creates migration graphdb in namespace ns and gives it the
// status the operator would: phase, and Ready or Stalled for generation
// observed.
func setMigration(t *testing.T, c client.Client, ns string, phase pgv1.Phase, observed int64) {
	t.Helper()
	ctx := context.Background()
	pm := &pgv1.PlacementMigration{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "graphdb"}, pm); err != nil {
		_ = c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		pm = &pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "graphdb"}, Spec: pgv1.PlacementMigrationSpec{
			Targets:    []pgv1.TargetRef{{Kind: pgv1.KindDeployment, Name: "graphdb"}},
			Constraint: pgv1.Constraint{PodAntiAffinity: &pgv1.PodAntiAffinityConstraint{TopologyKey: corev1.LabelHostname}}}}
		if err := c.Create(ctx, pm); err != nil {
			t.Fatal(err)
		}
	}
	pm.Status.Phase, pm.Status.ObservedGeneration = phase, observed
	ready, stalled := metav1.ConditionFalse, metav1.ConditionFalse
	switch phase {
	case pgv1.PhaseSucceeded:
		ready = metav1.ConditionTrue
	case pgv1.PhaseBlocked:
		stalled = metav1.ConditionTrue
	}
	now := metav1.Now()
	pm.Status.Conditions = []metav1.Condition{
		{Type: pgv1.ConditionReady, Status: ready, Reason: string(phase), Message: "the operator says " + string(phase), ObservedGeneration: observed, LastTransitionTime: now},
		{Type: pgv1.ConditionStalled, Status: stalled, Reason: string(phase), Message: "two replicas cannot leave one node", ObservedGeneration: observed, LastTransitionTime: now},
	}
	if err := c.Status().Update(ctx, pm); err != nil {
		t.Fatal(err)
	}
}

// bumpGeneration changes the spec, as a new commit would.
func bumpGeneration(t *testing.T, c client.Client, ns string) {
	t.Helper()
	pm := &pgv1.PlacementMigration{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "graphdb"}, pm); err != nil {
		t.Fatal(err)
	}
	pm.Spec.FinalStage = pgv1.StageSoft
	if err := c.Update(context.Background(), pm); err != nil {
		t.Fatal(err)
	}
}

// wait and status across a fleet: wait returns when every row is Ready
// for its current spec, fails at once on a Stalled row or a migration that
// is not there, and at the timeout on a status about an older spec;
// status --fail-on turns the same levels into an exit code.
func TestWaitAndStatusAcrossAFleet(t *testing.T) {
	cfg, c := startAPIServer(t)
	dir := t.TempDir()
	kubeconfig := regionsKubeconfig(t, cfg, dir, "eu", "us", "ap")
	setMigration(t, c, "eu", pgv1.PhaseApplyingSoft, 1)
	setMigration(t, c, "us", pgv1.PhaseWaitingForCapacity, 1)
	placement := func(args ...string) (string, string, int) {
		t.Helper()
		return run(t, "", append([]string{"--kubeconfig", kubeconfig}, args...)...)
	}

	t.Run("waits until every cluster is Ready", func(t *testing.T) {
		go func() {
			time.Sleep(time.Second)
			setMigration(t, c, "eu", pgv1.PhaseSucceeded, 1)
			time.Sleep(time.Second)
			setMigration(t, c, "us", pgv1.PhaseSucceeded, 1)
		}()
		out, stderr, code := placement("wait", "graphdb", "--contexts", "eu,us", "--timeout", "2m")
		if code != ExitOK || !strings.Contains(out, "eu: placementmigration.placementguard.io/graphdb condition met") ||
			!strings.Contains(out, "us: placementmigration.placementguard.io/graphdb condition met") {
			t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
		}
		out, _, code = placement("wait", "graphdb", "--timeout", "0")
		if code != ExitOK || out != "placementmigration.placementguard.io/graphdb condition met\n" {
			t.Errorf("one cluster, as kubectl wait prints it: exit %d\n%s", code, out)
		}
	})

	t.Run("a migration that is not there is a row, not a wait", func(t *testing.T) {
		out, stderr, code := placement("wait", "graphdb", "--contexts", "eu,ap", "--timeout", "10m")
		if code != ExitHazards || !strings.Contains(out, `no PlacementMigration "graphdb" in namespace ap`) ||
			!strings.Contains(stderr, "1 row(s) did not meet condition=Ready") {
			t.Errorf("exit %d\n%s\n%s", code, out, stderr)
		}
	})

	t.Run("a Stalled migration ends the wait for Ready", func(t *testing.T) {
		setMigration(t, c, "us", pgv1.PhaseBlocked, 1)
		out, _, code := placement("wait", "graphdb", "--contexts", "eu,us", "--timeout", "10m")
		if code != ExitHazards || !hasRow(out, "us") || !strings.Contains(out, "Stalled (Blocked): two replicas cannot leave one node") {
			t.Errorf("exit %d\n%s", code, out)
		}
		out, _, code = placement("wait", "graphdb", "--contexts", "us", "--for", "condition=Stalled", "--timeout", "10s")
		if code != ExitOK || !strings.Contains(out, "condition met") {
			t.Errorf("--for=condition=Stalled: exit %d\n%s", code, out)
		}
		out, _, code = placement("status", "graphdb", "--contexts", "eu,us", "--fail-on", "Blocked", "-o", "wide")
		if code != ExitHazards || !hasRow(out, "us") || !strings.Contains(out, "MESSAGE") {
			t.Errorf("status --fail-on Blocked: exit %d\n%s", code, out)
		}
		if _, _, code = placement("status", "graphdb", "--contexts", "eu,us"); code != ExitOK {
			t.Errorf("status without --fail-on: exit %d, want 0", code)
		}
	})

	t.Run("a status about an older spec is not Ready", func(t *testing.T) {
		bumpGeneration(t, c, "eu")
		out, _, code := placement("wait", "graphdb", "--contexts", "eu", "--timeout", "3s")
		if code != ExitHazards || !hasRow(out, "eu") || !strings.Contains(out, " no ") {
			t.Errorf("exit %d\n%s", code, out)
		}
		if _, _, code = placement("status", "graphdb", "--contexts", "eu", "--fail-on", "Warn"); code != ExitHazards {
			t.Errorf("status --fail-on Warn: exit %d, want 1", code)
		}
		if _, _, code = placement("status", "graphdb", "--contexts", "eu", "--fail-on", "Blocked"); code != ExitOK {
			t.Errorf("status --fail-on Blocked: exit %d, want 0", code)
		}
	})

	t.Run("kubectl's output conventions", func(t *testing.T) {
		out, _, code := placement("status", "-n", "eu", "-o", "json")
		var list struct {
			APIVersion, Kind string
			Items            []pgv1.PlacementMigration
		}
		if err := json.Unmarshal([]byte(out), &list); err != nil || code != ExitOK || list.Kind != "List" || list.APIVersion != "v1" ||
			len(list.Items) != 1 || list.Items[0].Kind != "PlacementMigration" {
			t.Errorf("status -o json: exit %d, %v\n%s", code, err, out)
		}
		out, _, _ = placement("status", "-n", "us", "--no-headers", "-o", "wide")
		if strings.Contains(out, "NAME") || !strings.Contains(out, "two replicas") && !strings.Contains(out, "the operator says") {
			t.Errorf("status --no-headers -o wide:\n%s", out)
		}
	})

	t.Run("naming a fleet", func(t *testing.T) {
		_, stderr, code := placement("status", "graphdb", "--contexts", "prod-*")
		if code != ExitUsage || !strings.Contains(stderr, `"prod-*" matches no context of the kubeconfig`) {
			t.Errorf("a pattern that matches nothing: exit %d\n%s", code, stderr)
		}
		out, stderr, code := placement("status", "graphdb", "--contexts", "e*,eu-again,us", "--exclude-contexts", "eu-*")
		if code != ExitOK || !hasRow(out, "eu") || !hasRow(out, "us") || hasRow(out, "eu-again") || stderr != "" {
			t.Errorf("a pattern and an exclusion: exit %d\n%s\n%s", code, out, stderr)
		}
		out, stderr, _ = placement("status", "graphdb", "--contexts", "eu,eu-again")
		if hasRow(out, "eu-again") || !strings.Contains(stderr, "eu-again reaches the API server") {
			t.Errorf("a context that repeats another is asked once:\n%s\n%s", out, stderr)
		}
		out, _, code = placement("wait", "graphdb", "--contexts", "eu,eu-again,down", "--list-clusters")
		if code != ExitOK || !hasRow(out, "down", "down", "https://"+strings.TrimPrefix(regionsServer(t, kubeconfig, "down"), "https://"), "eu", "asked") ||
			!strings.Contains(out, "the same server as eu: not asked again") {
			t.Errorf("--list-clusters: exit %d\n%s", code, out)
		}
		for _, refused := range [][]string{{"--user", "admin"}, {"--context", "us"}, {"--insecure-skip-tls-verify"}, {"--token", "x"}} {
			_, stderr, code := placement(append([]string{"status", "graphdb", "--contexts", "eu,us"}, refused...)...)
			if code != ExitUsage || !strings.Contains(stderr, refused[0]) {
				t.Errorf("%v across a fleet: exit %d\n%s", refused, code, stderr)
			}
		}
		if _, stderr, code := placement("status", "graphdb", "--contexts", "eu", "--request-timeout", "soon"); code != ExitUsage {
			t.Errorf("--request-timeout soon: exit %d\n%s", code, stderr)
		}
		if out, _, code := placement("status", "graphdb", "--contexts", "eu", "--request-timeout", "20s"); code != ExitOK || !hasRow(out, "eu") {
			t.Errorf("--request-timeout is honoured: exit %d\n%s", code, out)
		}
		for _, wrong := range [][]string{{"--as-user-extra", "team=db"}, {"--as", "auditor", "--as-user-extra", "team"}} {
			if _, stderr, code := placement(append([]string{"status", "graphdb", "--contexts", "eu"}, wrong...)...); code != ExitUsage || !strings.Contains(stderr, "--as-user-extra") {
				t.Errorf("%v across a fleet: exit %d\n%s", wrong, code, stderr)
			}
		}
		if out, _, code := placement("status", "graphdb", "--contexts", "eu,us", "--disable-compression"); code != ExitOK || !hasRow(out, "eu") || !hasRow(out, "us") {
			t.Errorf("--disable-compression across a fleet: exit %d\n%s", code, out)
		}
	})

	t.Run("a credential plugin that hangs costs its cluster a row, and outlives nothing", func(t *testing.T) {
		out, _, code := placement("status", "graphdb", "--contexts", "eu,hung", "--cluster-timeout", "2s")
		if code != ExitHazards || !hasRow(out, "eu") || !strings.Contains(out, "no answer within 2s") {
			t.Errorf("status: exit %d\n%s", code, out)
		}
		pid := readPIDFile(t, filepath.Join(dir, "hang.sh.pid"))
		if processRuns(pid) {
			t.Errorf("the plugin %d still runs after the command", pid)
		}
	})
}

// regionsServer is the server of a context of the kubeconfig.
func regionsServer(t *testing.T, path, contextName string) string {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return kc.Clusters[kc.Contexts[contextName].Cluster].Server
}

func readPIDFile(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := json.Unmarshal([]byte(strings.TrimSpace(string(b))), &pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// processRuns reports whether pid still runs (a zombie, killed and not
// yet reaped, does not).
func processRuns(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strings.TrimSpace(jsonInt(pid)), "stat"))
	return err != nil || !strings.Contains(string(stat), ") Z ")
}

func jsonInt(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}
