package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
)

// managerCore (-manager-core), when set, is the CPU the managers run on,
// alone: the harness, the API server and etcd it starts are kept on the
// others. As in a cluster, where the manager's container has its CPU and
// the control plane runs elsewhere; on a small machine sharing every
// core, the check's latency measures the API server's load as much as
// the check.
var managerCore = -1

// isolateManagerCore keeps this process, and every process it starts
// from now on, off managerCore.
func isolateManagerCore() error {
	if managerCore < 0 {
		return nil
	}
	if managerCore >= runtime.NumCPU() || runtime.NumCPU() < 2 {
		return fmt.Errorf("-manager-core %d: the machine has %d CPUs, and the others need one", managerCore, runtime.NumCPU())
	}
	var others []string
	for c := range runtime.NumCPU() {
		if c != managerCore {
			others = append(others, strconv.Itoa(c))
		}
	}
	// Every thread of the harness: processes started later inherit it.
	out, err := exec.Command("taskset", "--all-tasks", "--cpu-list", "--pid", strings.Join(others, ","), strconv.Itoa(os.Getpid())).CombinedOutput()
	if err != nil {
		return fmt.Errorf("taskset: %w: %s", err, out)
	}
	return nil
}

// managerCommand is the command that runs the manager binary with args,
// on managerCore when it is set.
func managerCommand(binary string, args []string) *exec.Cmd {
	if managerCore < 0 {
		return exec.Command(binary, args...)
	}
	return exec.Command("taskset", append([]string{"--cpu-list", strconv.Itoa(managerCore), binary}, args...)...)
}
