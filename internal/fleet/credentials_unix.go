//go:build unix

package fleet

import (
	"os/exec"
	"syscall"
)

// isolate starts cmd in a process group of its own, so that stopping it
// stops what it started too.
func isolate(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { stop(cmd); return nil }
}

// stop kills cmd and, when it leads a process group, the group.
func stop(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	if cmd.SysProcAttr != nil && cmd.SysProcAttr.Setpgid {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return
	}
	_ = cmd.Process.Kill()
}
