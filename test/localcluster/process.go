package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// process is one control plane component running as a child process, its
// output in a log file of the cluster's work directory.
type process struct {
	name    string
	binary  string
	args    []string
	env     []string
	workDir string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error
	// stopped is set when a test stopped the process on purpose.
	stopped bool
}

// startProcess runs binary with args in workDir; env is added to this
// process's environment.
func startProcess(name, binary string, args []string, workDir string, env ...string) (*process, error) {
	logPath := filepath.Join(workDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create log of %s: %w", name, err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Dir = workDir
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// Pdeathsig kills the component if the test binary dies without running
	// its cleanup (a panic, a timeout, a kill -9), so no process outlives it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, binary: binary, args: args, env: env, workDir: workDir, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, with its error.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop asks the process to terminate and kills it if it has not after the
// grace period.
func (p *process) stop(grace time.Duration) {
	if done, _ := p.exited(); done {
		return
	}
	// A hung (SIGSTOPped) process handles SIGTERM only once resumed.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGCONT)
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// logTail returns the last n bytes of the process's log.
func (p *process) logTail(n int) string { return tail(p.logPath, n) }

// freePorts reserves n distinct free TCP ports on 127.0.0.1. The listeners
// are held until all are chosen so the kernel cannot hand one out twice.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("reserve a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitFor polls check until it returns nil, the process dies or ctx ends.
func waitFor(ctx context.Context, what string, procs []*process, check func(context.Context) error) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		for _, p := range procs {
			if done, err := p.exited(); done {
				return fmt.Errorf("%s exited while waiting for %s: %v; last log lines:\n%s", p.name, what, err, p.logTail(4000))
			}
		}
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w (last error: %v)", what, ctx.Err(), errors.Join(last))
		case <-tick.C:
		}
	}
}

// FreePorts are n distinct free TCP ports on 127.0.0.1, for servers a test
// starts beside the cluster.
func FreePorts(n int) ([]int, error) { return freePorts(n) }

// FreePort is a free TCP port on 127.0.0.1, for a server a test starts
// beside the cluster.
func FreePort() (int, error) {
	ports, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}
