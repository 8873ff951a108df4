package fleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/pkg/apis/clientauthentication"
	"k8s.io/client-go/pkg/apis/clientauthentication/install"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Exec credential plugins are run here rather than by client-go, which
// starts them with no way to stop them: across a fleet a plugin that hangs
// would outlive the command (and hold a pipe a script reads the command's
// output through). Here each runs under the member's context, in a process
// group of its own that is killed when the context ends, and every plugin
// still running when the command ends is killed by StopPlugins. The
// protocol is client-go's: KUBERNETES_EXEC_INFO in, an ExecCredential out.

const execInfoEnv = "KUBERNETES_EXEC_INFO"

var (
	credentialScheme = runtime.NewScheme()
	credentialCodecs = serializer.NewCodecFactory(credentialScheme)
	// terminal lets one interactive plugin at a time have the terminal:
	// two asking for a password on one screen at once cannot be answered.
	terminal = make(chan struct{}, 1)
	running  = newPlugins()
)

func init() { install.Install(credentialScheme) }

// runCredentialPlugin runs cfg's exec plugin and puts the credential it
// returns in cfg in its place.
func runCredentialPlugin(ctx context.Context, cfg *rest.Config, c Connect) error {
	p := cfg.ExecProvider
	gv, err := schema.ParseGroupVersion(p.APIVersion)
	if err != nil || gv.Group != clientauthentication.SchemeGroupVersion.Group {
		return fmt.Errorf("exec plugin apiVersion %q is not a client.authentication.k8s.io version", p.APIVersion)
	}
	interactive, err := interactiveRun(p, c.Terminal != nil)
	if err != nil {
		return fmt.Errorf("exec plugin %s: %w", p.Command, err)
	}
	info := &clientauthentication.ExecCredential{Spec: clientauthentication.ExecCredentialSpec{Interactive: interactive}}
	if p.ProvideClusterInfo {
		if info.Spec.Cluster, err = rest.ConfigToExecCluster(cfg); err != nil {
			return err
		}
	}
	encoded, err := runtime.Encode(credentialCodecs.LegacyCodec(gv), info)
	if err != nil {
		return fmt.Errorf("encode the exec plugin's input: %w", err)
	}
	cmd := exec.CommandContext(ctx, p.Command, p.Args...)
	cmd.Env = append(os.Environ(), execInfoEnv+"="+string(encoded))
	for _, e := range p.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, c.Stderr
	if cmd.Stderr == nil {
		cmd.Stderr = io.Discard
	}
	// A grandchild holding the plugin's stdout must not hold the command.
	cmd.WaitDelay = time.Second
	if interactive {
		select {
		case terminal <- struct{}{}:
			defer func() { <-terminal }()
		case <-ctx.Done():
			return fmt.Errorf("exec plugin %s: waiting for the terminal: %w", p.Command, context.Cause(ctx))
		}
		cmd.Stdin = c.Terminal
	} else {
		isolate(cmd)
	}
	if err := running.run(cmd); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("exec plugin %s did not answer in time: stopped", p.Command)
		}
		return pluginFailed(p, err)
	}
	return useCredential(cfg, gv, stdout.Bytes())
}

// interactiveRun decides, as client-go does, whether the plugin gets the
// terminal.
func interactiveRun(p *clientcmdapi.ExecConfig, haveTerminal bool) (bool, error) {
	switch p.InteractiveMode {
	case clientcmdapi.NeverExecInteractiveMode:
		return false, nil
	case clientcmdapi.IfAvailableExecInteractiveMode, "":
		return haveTerminal && !p.StdinUnavailable, nil
	case clientcmdapi.AlwaysExecInteractiveMode:
		if !haveTerminal {
			return false, errors.New("it needs a terminal (interactiveMode Always), and standard input is not one")
		}
		if p.StdinUnavailable {
			return false, fmt.Errorf("it needs standard input, which is unavailable: %s", p.StdinUnavailableMessage)
		}
		return true, nil
	}
	return false, fmt.Errorf("unknown interactiveMode %q", p.InteractiveMode)
}

// pluginFailed says why a plugin gave no credential, with its install
// hint when it could not be started.
func pluginFailed(p *clientcmdapi.ExecConfig, err error) error {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		if p.InstallHint != "" {
			return fmt.Errorf("exec plugin %s: %w\n%s", p.Command, err, p.InstallHint)
		}
	}
	return fmt.Errorf("exec plugin %s: %w", p.Command, err)
}

// useCredential reads the plugin's ExecCredential into cfg: a token, or a
// client certificate and key.
func useCredential(cfg *rest.Config, gv schema.GroupVersion, out []byte) error {
	cred := &clientauthentication.ExecCredential{}
	_, gvk, err := credentialCodecs.UniversalDecoder(gv).Decode(out, nil, cred)
	if err != nil {
		return fmt.Errorf("exec plugin %s: read its output: %w", cfg.ExecProvider.Command, err)
	}
	if gvk.GroupVersion() != gv {
		return fmt.Errorf("exec plugin %s answered in %s, not %s", cfg.ExecProvider.Command, gvk.GroupVersion(), gv)
	}
	s := cred.Status
	switch {
	case s == nil || (s.Token == "" && s.ClientCertificateData == "" && s.ClientKeyData == ""):
		return fmt.Errorf("exec plugin %s returned no token and no certificate", cfg.ExecProvider.Command)
	case (s.ClientCertificateData == "") != (s.ClientKeyData == ""):
		return fmt.Errorf("exec plugin %s returned a certificate or a key, not both", cfg.ExecProvider.Command)
	}
	cfg.ExecProvider = nil
	cfg.BearerToken, cfg.BearerTokenFile = s.Token, ""
	if s.ClientCertificateData != "" {
		cfg.CertData, cfg.KeyData = []byte(s.ClientCertificateData), []byte(s.ClientKeyData)
		cfg.CertFile, cfg.KeyFile = "", ""
	}
	return nil
}

// plugins are the credential plugins running now.
type plugins struct {
	mu    sync.Mutex
	procs map[*exec.Cmd]struct{}
	// gone is signalled each time a plugin has been waited for.
	gone sync.Cond
}

func newPlugins() *plugins {
	ps := &plugins{procs: map[*exec.Cmd]struct{}{}}
	ps.gone.L = &ps.mu
	return ps
}

// run starts cmd, keeps it known while it runs, and waits for it.
func (ps *plugins) run(cmd *exec.Cmd) error {
	ps.mu.Lock()
	if err := cmd.Start(); err != nil {
		ps.mu.Unlock()
		return err
	}
	ps.procs[cmd] = struct{}{}
	ps.mu.Unlock()
	err := cmd.Wait()
	ps.mu.Lock()
	delete(ps.procs, cmd)
	ps.gone.Broadcast()
	ps.mu.Unlock()
	return err
}

// StopPlugins kills every credential plugin still running, with the
// processes it started, and waits (a few seconds at most) until each has
// been reaped: a command calls it before it exits, so that none outlives
// it.
func StopPlugins() {
	running.mu.Lock()
	defer running.mu.Unlock()
	for cmd := range running.procs {
		stop(cmd)
	}
	give := time.AfterFunc(stopWait, func() {
		running.mu.Lock()
		defer running.mu.Unlock()
		running.gone.Broadcast()
	})
	defer give.Stop()
	deadline := time.Now().Add(stopWait)
	for len(running.procs) > 0 && time.Now().Before(deadline) {
		running.gone.Wait()
	}
}

// stopWait bounds how long StopPlugins waits for killed plugins.
const stopWait = 3 * time.Second
