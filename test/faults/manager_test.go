package faults

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/gomega"
)

// manager is the operator's binary run as a child process, as a
// Deployment would run it, connected to the API server through the fault
// proxy: a kill is a real SIGKILL, a hang a real SIGSTOP.
type manager struct {
	name       string
	binary     string
	kubeconfig string
	args       []string
	logPath    string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	// starts counts how often the process was started.
	starts int
}

func newManager(name, binary, kubeconfig string, args ...string) *manager {
	return &manager{name: name, binary: binary, kubeconfig: kubeconfig, args: args,
		logPath: filepath.Join(workDir, name+".log")}
}

// start runs the manager; it is an error to start a running one.
func (m *manager) start() {
	m.mu.Lock()
	defer m.mu.Unlock()
	Expect(m.cmd == nil || m.exited()).To(BeTrue(), "%s is running", m.name)
	logFile, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	Expect(err).NotTo(HaveOccurred())
	fmt.Fprintf(logFile, "===== start %d at %s\n", m.starts+1, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(m.binary, m.args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+m.kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	Expect(cmd.Start()).To(Succeed())
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(done)
	}()
	m.cmd, m.done = cmd, done
	m.starts++
}

// exited reports whether the process has ended; m.mu is held.
func (m *manager) exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// running reports whether the manager runs.
func (m *manager) running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cmd != nil && !m.exited()
}

// kill sends SIGKILL and waits until the process is gone. It may be called
// from the fault proxy's hook, while a request of the manager is in flight.
func (m *manager) kill() {
	m.mu.Lock()
	cmd, done := m.cmd, m.done
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// hang freezes the manager (SIGSTOP); resume thaws it.
func (m *manager) hang()   { m.signal(syscall.SIGSTOP) }
func (m *manager) resume() { m.signal(syscall.SIGCONT) }

func (m *manager) signal(sig syscall.Signal) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil && !m.exited() {
		_ = syscall.Kill(-m.cmd.Process.Pid, sig)
	}
}

// stop ends the manager for good at the end of a spec.
func (m *manager) stop() {
	m.resume()
	m.kill()
}

// log returns the end of the manager's log, for a failed spec.
func (m *manager) log(n int) string {
	b, err := os.ReadFile(m.logPath)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// errorsIn counts the reconcile errors a manager's log reports for the
// migrations of one namespace: a spec's manager may also meet the
// migrations of specs run before it, in namespaces being deleted.
func errorsIn(log, namespace string) int {
	n := 0
	for line := range strings.Lines(log) {
		if strings.Contains(line, "Reconciler error") && strings.Contains(line, `"`+namespace+`"`) {
			n++
		}
	}
	return n
}
