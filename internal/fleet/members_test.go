package fleet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func kubeconfig(contexts ...string) *clientcmdapi.Config {
	c := clientcmdapi.NewConfig()
	for _, name := range contexts {
		c.Clusters[name] = &clientcmdapi.Cluster{Server: "https://" + name + ".example:6443"}
		c.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: "t"}
		c.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: "ns-" + name}
	}
	return c
}

func names(ms []Member) string {
	var out []string
	for _, m := range ms {
		s := m.Name
		if m.Err != nil {
			s += "!"
		}
		out = append(out, s)
	}
	return strings.Join(out, ",")
}

func TestContexts(t *testing.T) {
	c := kubeconfig("prod-eu", "prod-us", "dev")
	tests := []struct {
		name  string
		given []string
		all   bool
		want  string
	}{
		{"in the order given, each once", []string{"prod-us", " prod-eu", "prod-us", ""}, false, "prod-us,prod-eu"},
		{"a context the kubeconfig lacks is a member with its error", []string{"prod-eu", "staging"}, false, "prod-eu,staging!"},
		{"all, by name", nil, true, "dev,prod-eu,prod-us"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := names(Contexts(c, tt.given, tt.all)); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
	ms := Contexts(c, []string{"prod-us"}, false)
	cfg, err := ms[0].RESTConfig()
	if err != nil || cfg.Host != "https://prod-us.example:6443" || ms[0].Namespace() != "ns-prod-us" || !ms[0].Live() {
		t.Errorf("prod-us reaches %v (%v), namespace %q", cfg, err, ms[0].Namespace())
	}
}

func TestKubeconfigDir(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("eu.yaml", `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://eu.example:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`)
	write("us.kubeconfig", `apiVersion: v1
kind: Config
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: other
`)
	write("broken.yaml", "{ not yaml")
	write(".hidden", "ignored")
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	ms, err := KubeconfigDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(ms); got != "broken!,eu,us!" {
		t.Fatalf("members %s, want broken!,eu,us!", got)
	}
	if cfg, err := ms[1].RESTConfig(); err != nil || cfg.Host != "https://eu.example:6443" {
		t.Errorf("eu reaches %v, %v", cfg, err)
	}
	if !strings.Contains(ms[2].Err.Error(), "no current context") {
		t.Errorf("us: %v", ms[2].Err)
	}
	if _, err := KubeconfigDir(filepath.Join(dir, "sub")); err == nil {
		t.Error("an empty directory is a fleet of none: want an error")
	}
}

func TestSnapshotDir(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"us-east", "eu-west", ".git"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "eu-west"), filepath.Join(dir, "ap-south")); err != nil {
		t.Fatal(err)
	}
	ms, err := SnapshotDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(ms); got != "ap-south,eu-west,us-east" {
		t.Errorf("members %s", got)
	}
	if ms[0].Live() || ms[0].SnapshotDir != filepath.Join(dir, "ap-south") {
		t.Errorf("ap-south: %+v", ms[0])
	}
	if _, err := ms[0].RESTConfig(); err == nil {
		t.Error("a snapshot has no API server")
	}
	if _, err := SnapshotDir(filepath.Join(dir, "missing")); err == nil {
		t.Error("want an error for a directory that does not exist")
	}
}
