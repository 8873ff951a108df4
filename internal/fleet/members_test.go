package fleet

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
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
	c := kubeconfig("prod-eu", "prod-us", "dev", "a,b")
	tests := []struct {
		name  string
		given []string
		all   bool
		want  string
		err   string
	}{
		{"in the order given, each once", []string{"prod-us", " prod-eu", "prod-us", ""}, false, "prod-us,prod-eu", ""},
		{"a context the kubeconfig lacks is a member with its error", []string{"prod-eu", "staging"}, false, "prod-eu,staging!", ""},
		{"all, by name", nil, true, "a,b,dev,prod-eu,prod-us", ""},
		{"a pattern, its matches in name order", []string{"dev", "prod-*"}, false, "dev,prod-eu,prod-us", ""},
		{"a name with a comma is a name", []string{"a,b"}, false, "a,b", ""},
		{"comma-separated names and patterns", []string{"dev,prod-*", "a,b"}, false, "dev,prod-eu,prod-us,a,b", ""},
		{"a pattern that matches nothing is an error", []string{"prod-eu", "stag*"}, false, "", `"stag*" matches no context of the kubeconfig (it has a,b, dev, prod-eu, prod-us)`},
		{"a pattern that does not parse is an error", []string{"prod-[eu"}, false, "", "syntax error in pattern"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := Contexts(c, tt.given, tt.all)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one saying %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := names(ms); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
	ms, _ := Contexts(c, []string{"prod-us"}, false)
	cfg, err := ms[0].RESTConfig(context.Background(), Connect{})
	if err != nil || cfg.Host != "https://prod-us.example:6443" || ms[0].Namespace() != "ns-prod-us" || !ms[0].Live() {
		t.Errorf("prod-us reaches %v (%v), namespace %q", cfg, err, ms[0].Namespace())
	}
}

func TestExclude(t *testing.T) {
	ms, _ := Contexts(kubeconfig("prod-eu", "prod-us", "prod-canary", "dev"), nil, true)
	kept, err := Exclude(ms, []string{"*-canary,dev"})
	if err != nil || names(kept) != "prod-eu,prod-us" {
		t.Errorf("kept %s, %v", names(kept), err)
	}
	if _, err := Exclude(ms, []string{"[x"}); err == nil {
		t.Error("a pattern that does not parse: want an error")
	}
}

// Two contexts that reach one API server as one user with one scope ask
// one question: the second is named, not asked; another namespace or
// another user is a question of its own.
func TestDistinct(t *testing.T) {
	c := kubeconfig("eu", "eu-alias", "eu-web", "eu-viewer", "us")
	c.Contexts["eu-alias"].Cluster, c.Contexts["eu-alias"].AuthInfo = "eu", "eu"
	c.Contexts["eu-alias"].Namespace = "ns-eu"
	c.Clusters["eu-web"].Server = "https://eu.example:6443/"
	c.Contexts["eu-web"].AuthInfo = "eu"
	c.Clusters["eu-viewer"].Server = "https://eu.example:6443"
	c.AuthInfos["eu-viewer"] = &clientcmdapi.AuthInfo{Token: "t", Impersonate: "viewer"}
	ms, _ := Contexts(c, []string{"eu", "eu-alias", "eu-web", "eu-viewer", "us", "gone"}, false)
	byNamespace := func(m Member) string { return m.Namespace() }
	kept, repeats := Distinct(ms, byNamespace)
	if names(kept) != "eu,eu-web,eu-viewer,us,gone!" || len(repeats) != 1 || repeats[0].Member.Name != "eu-alias" || repeats[0].Of != "eu" {
		t.Errorf("kept %s, repeats %+v", names(kept), repeats)
	}
	kept, repeats = Distinct(ms, func(Member) string { return "" })
	if names(kept) != "eu,eu-viewer,us,gone!" || len(repeats) != 2 {
		t.Errorf("every namespace: kept %s, repeats %+v", names(kept), repeats)
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
	if cfg, err := ms[1].RESTConfig(context.Background(), Connect{}); err != nil || cfg.Host != "https://eu.example:6443" {
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
	if _, err := ms[0].RESTConfig(context.Background(), Connect{}); err == nil {
		t.Error("a snapshot has no API server")
	}
	if _, err := SnapshotDir(filepath.Join(dir, "missing")); err == nil {
		t.Error("want an error for a directory that does not exist")
	}
}

// What the command line sets for every member reaches each member's
// client: the request timeout, who it acts as, and compression.
func TestConnectReachesEveryMember(t *testing.T) {
	ms, err := Contexts(kubeconfig("eu", "us"), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	c := Connect{
		RequestTimeout:     7 * time.Second,
		Impersonate:        rest.ImpersonationConfig{UserName: "auditor", Groups: []string{"sre"}, Extra: map[string][]string{"team": {"db"}}},
		DisableCompression: true,
	}
	for _, m := range ms {
		cfg, err := m.RESTConfig(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Timeout != 7*time.Second || cfg.Impersonate.UserName != "auditor" || cfg.Impersonate.Groups[0] != "sre" ||
			cfg.Impersonate.Extra["team"][0] != "db" || !cfg.DisableCompression {
			t.Errorf("%s: timeout %v, impersonate %+v, compression off %v", m.Name, cfg.Timeout, cfg.Impersonate, cfg.DisableCompression)
		}
	}
	cfg, err := ms[0].RESTConfig(context.Background(), Connect{})
	if err != nil || cfg.Impersonate.UserName != "" || cfg.DisableCompression || cfg.Timeout != 0 {
		t.Errorf("nothing set on the command line changed the member: %+v %v", cfg, err)
	}
}
