//go:build unix

package fleet

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pluginKubeconfig writes, in dir, a kubeconfig whose user runs the shell
// script body as its exec credential plugin, named by a path relative to
// the kubeconfig's directory, as kubectl allows.
func pluginKubeconfig(t *testing.T, dir, body string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "credential"), []byte("#!/bin/sh\n"+body), 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "cluster.yaml")
	kubeconfig := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://c.example:6443", certificate-authority: pki/ca.crt}}]
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./bin/credential
      args: [` + dir + `]
      env: [{name: SCOPE, value: fleet}]
      provideClusterInfo: true
      interactiveMode: Never
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "pki"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pki", "ca.crt"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A kubeconfig of a directory names its plugin and files relative to
// itself; the plugin gets the exec protocol's input and its token is used.
func TestCredentialPluginGivesAToken(t *testing.T) {
	dir := t.TempDir()
	pluginKubeconfig(t, dir, `echo "$KUBERNETES_EXEC_INFO" > "$1/info.json"
echo "$SCOPE" > "$1/scope"
echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"from-the-plugin"}}'
`)
	t.Chdir(t.TempDir()) // relative paths must not be read from here
	ms, err := KubeconfigDir(dir)
	if err != nil || ms[0].Err != nil {
		t.Fatal(err, ms[0].Err)
	}
	cfg, err := ms[0].RESTConfig(context.Background(), Connect{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BearerToken != "from-the-plugin" || cfg.ExecProvider != nil || cfg.CAFile != filepath.Join(dir, "pki", "ca.crt") {
		t.Errorf("config: token %q, exec %v, CA file %q", cfg.BearerToken, cfg.ExecProvider, cfg.CAFile)
	}
	info, _ := os.ReadFile(filepath.Join(dir, "info.json"))
	scope, _ := os.ReadFile(filepath.Join(dir, "scope"))
	if !strings.Contains(string(info), `"server":"https://c.example:6443"`) || !strings.Contains(string(info), `"interactive":false`) ||
		strings.TrimSpace(string(scope)) != "fleet" {
		t.Errorf("the plugin was given %s and SCOPE %q", info, scope)
	}
}

// A plugin that hangs, and the process it started, are killed when the
// member's time is up: nothing outlives the question.
func TestCredentialPluginThatHangsIsStopped(t *testing.T) {
	dir := t.TempDir()
	pluginKubeconfig(t, dir, `sleep 300 &
echo $! > "$1/child.pid"
echo $$ > "$1/plugin.pid"
wait
`)
	ms, err := KubeconfigDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err = ms[0].RESTConfig(ctx, Connect{})
	if err == nil || !strings.Contains(err.Error(), "did not answer in time") {
		t.Fatalf("error %v, want one saying the plugin did not answer", err)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Errorf("returned after %s", waited)
	}
	for _, f := range []string{"plugin.pid", "child.pid"} {
		if pid := readPID(t, filepath.Join(dir, f)); alive(pid) {
			t.Errorf("%s %d still runs", f, pid)
		}
	}
}

// A plugin still running when the command ends is killed by StopPlugins.
func TestStopPluginsKillsWhatRuns(t *testing.T) {
	dir := t.TempDir()
	pluginKubeconfig(t, dir, `echo $$ > "$1/plugin.pid"
exec sleep 300
`)
	ms, err := KubeconfigDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := ms[0].RESTConfig(context.Background(), Connect{})
		done <- err
	}()
	pidFile := filepath.Join(dir, "plugin.pid")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile(pidFile); len(b) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the plugin did not start")
		}
	}
	StopPlugins()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a stopped plugin gave a credential")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RESTConfig still waits on a stopped plugin")
	}
	if pid := readPID(t, pidFile); alive(pid) {
		t.Errorf("plugin %d still runs", pid)
	}
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// alive reports whether pid runs, waiting a moment for a kill to land.
func alive(pid int) bool {
	for range 50 {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return false
		}
		// A killed child of this process is a zombie until reaped by its
		// parent; the test process reaps the plugin, and init the orphan.
		if state, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil && strings.Contains(string(state), ") Z ") {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}
