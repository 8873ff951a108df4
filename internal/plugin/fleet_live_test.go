package plugin

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/placement-guard/placement-guard/internal/fleet"
)

// startBareAPIServer starts a kube-apiserver and etcd without the CRD, from
// the binaries in assets ("" for KUBEBUILDER_ASSETS).
func startBareAPIServer(t *testing.T, assets string) (*rest.Config, client.Client) {
	t.Helper()
	env := &envtest.Environment{}
	if assets != "" {
		// By path: KUBEBUILDER_ASSETS would win over a directory.
		env.ControlPlane.GetAPIServer().Path = filepath.Join(assets, "kube-apiserver")
		env.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(assets, "etcd")}
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start a second API server (assets %q): %v", assets, err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{Scheme: Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, c
}

func serverVersion(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	v, err := discovery.NewDiscoveryClientForConfigOrDie(cfg).ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	return v.GitVersion
}

// closedPort is a port on 127.0.0.1 that nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// fleetKubeconfig writes a kubeconfig with a context per cluster, and two
// that cannot answer: one whose server is down and one whose user may
// read nothing.
func fleetKubeconfig(t *testing.T, clusters map[string]*rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	add := func(name string, cfg *rest.Config, as string) {
		kc.Clusters[name] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
		kc.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Impersonate: as}
		kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: "db"}
	}
	for name, cfg := range clusters {
		add(name, cfg, "")
	}
	add("nobody", clusters["alpha"], "nobody")
	down := rest.CopyConfig(clusters["alpha"])
	down.Host = "https://" + closedPort(t)
	add("down", down, "")
	kc.CurrentContext = "alpha"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// Across two live clusters (one without the CRD and, when
// PLACEMENT_GUARD_OLDEST_KUBE names its binaries, on the oldest
// Kubernetes the project supports) plan gives each its row with the
// version it runs, and a context that is missing, a server that is down
// and a user without rights each a row with its error; status finds the
// migration where it exists and says "not installed" where the CRD is not.
func TestFleetAcrossLiveClusters(t *testing.T) {
	alphaCfg, alpha := startAPIServer(t)
	betaCfg, beta := startBareAPIServer(t, os.Getenv("PLACEMENT_GUARD_OLDEST_KUBE"))
	snapshots := seedFleet(t)
	load(t, alpha, filepath.Join(snapshots, "us-two-data-nodes"))
	load(t, beta, filepath.Join(snapshots, "eu-one-data-node"))
	ctx := context.Background()
	docs, err := ReadDir("testdata/000/migration.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pm := docs[0].Object.(client.Object)
	pm.SetLabels(map[string]string{"team": "db"})
	if err := alpha.Create(ctx, pm); err != nil {
		t.Fatal(err)
	}
	kubeconfig := fleetKubeconfig(t, map[string]*rest.Config{"alpha": alphaCfg, "beta": betaCfg})

	out, stderr, code := run(t, "", "--kubeconfig", kubeconfig, "--contexts", "alpha,beta,gone,down,nobody",
		"plan", "-f", "testdata/000/migration.yaml", "-o", "json", "--cluster-timeout", "20s")
	if code != ExitHazards {
		t.Fatalf("exit %d, want 1 (clusters that could not be asked); stderr %s\n%s", code, stderr, out)
	}
	var plan FleetPlan
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := []struct {
		cluster, version, outcome, capacity, err string
		level                                    fleet.Level
	}{
		{"alpha", serverVersion(t, alphaCfg), "Waiting", "2/2", "", fleet.Warn},
		{"beta", serverVersion(t, betaCfg), "WaitingForCapacity", "1/2", "", fleet.Warn},
		{"gone", "", "Error", "", `context "gone" is not in the kubeconfig`, fleet.Unknown},
		{"down", "", "Error", "", "connection refused", fleet.Unknown},
		{"nobody", "", "Error", "", "forbidden", fleet.Unknown},
	}
	t.Logf("alpha runs %s, beta %s", want[0].version, want[1].version)
	if len(plan.Rows) != len(want) {
		t.Fatalf("%d rows, want %d:\n%s", len(plan.Rows), len(want), out)
	}
	for i, w := range want {
		r := plan.Rows[i]
		if r.Cluster != w.cluster || r.KubernetesVersion != w.version || r.Outcome != w.outcome || r.Capacity != w.capacity ||
			r.Level != w.level || !strings.Contains(r.Error, w.err) || (w.err == "") != (r.Error == "") {
			t.Errorf("row %d: %+v\nwant %+v", i, r, w)
		}
	}
	// The cluster without the CRD is planned as its snapshot is offline.
	offline, _, _ := run(t, "", "plan", "-f", "testdata/000/migration.yaml", "--snapshot", filepath.Join(snapshots, "eu-one-data-node"), "-o", "json")
	var rep Report
	if err := json.Unmarshal([]byte(offline), &rep); err != nil {
		t.Fatal(err)
	}
	alone := fleetRow(rep)
	alone.Cluster, alone.KubernetesVersion = "beta", want[1].version
	if got, wantRow := mustJSON(t, plan.Rows[1]), mustJSON(t, alone); got != wantRow {
		t.Errorf("live row\n%s\noffline\n%s", got, wantRow)
	}

	// lint: the same manifests against each cluster, and --live against one.
	out, stderr, code = run(t, "", "--kubeconfig", kubeconfig, "--contexts", "alpha,beta,nobody", "lint", "-o", "json", "testdata/000/manifests.yaml")
	var fl FleetLint
	if err := json.Unmarshal([]byte(out), &fl); err != nil {
		t.Fatalf("lint: %v\n%s\n%s", err, out, stderr)
	}
	if code != ExitHazards || len(fl.Rows) != 3 || fl.Rows[0].Level != fleet.Warn || fl.Rows[1].Level != fleet.Blocked ||
		fl.Rows[1].Findings[0].Type != "InsufficientCapacity" || !strings.Contains(fl.Rows[2].Error, "forbidden") {
		t.Errorf("lint across the fleet: exit %d\n%s", code, out)
	}
	single, _, code := run(t, "", "--kubeconfig", kubeconfig, "--context", "beta", "lint", "--live", "-o", "json", "testdata/000/manifests.yaml")
	var liveFindings []Finding
	if err := json.Unmarshal([]byte(single), &liveFindings); err != nil {
		t.Fatalf("lint --live: %v\n%s", err, single)
	}
	if code != ExitHazards || mustJSON(t, fl.Rows[1].Findings) != mustJSON(t, liveFindings) {
		t.Errorf("lint --live on beta: exit %d\n%s\nfleet row\n%s", code, single, mustJSON(t, fl.Rows[1].Findings))
	}

	out, stderr, code = run(t, "", "--kubeconfig", kubeconfig, "--contexts", "alpha,beta,down", "status", "-l", "team=db", "-o", "json")
	if code != ExitHazards {
		t.Fatalf("status: exit %d, want 1 (a cluster that could not be read); %s", code, stderr)
	}
	var st FleetStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(st.Rows) != 3 || st.Rows[0].Name != "graphdb-apart-from-search" || st.Rows[0].Namespace != "db" || st.Rows[0].Current ||
		!strings.HasPrefix(st.Rows[1].Note, "not installed") || !strings.Contains(st.Rows[2].Error, "connection refused") {
		t.Errorf("status rows:\n%s", out)
	}
	out, _, code = run(t, "", "--kubeconfig", kubeconfig, "--contexts", "alpha,beta", "status", "graphdb-apart-from-search")
	if code != ExitOK || !hasRow(out, "alpha", want[0].version, "db", "graphdb-apart-from-search", "<none>", "<none>", "no") ||
		!strings.Contains(out, "not installed") {
		t.Errorf("status table: exit %d\n%s", code, out)
	}
	out, _, _ = run(t, "", "--kubeconfig", kubeconfig, "--contexts", "alpha,beta", "status", "-l", "team=web")
	if !hasRow(out, "alpha", want[0].version, "none", "found") {
		t.Errorf("a selector that matches nothing:\n%s", out)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
