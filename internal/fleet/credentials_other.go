//go:build !unix

package fleet

import "os/exec"

// isolate leaves cmd as it is: without process groups, stopping it kills
// the plugin alone.
func isolate(*exec.Cmd) {}

// stop kills cmd.
func stop(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
