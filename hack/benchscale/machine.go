package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// userHZ is the unit of /proc/stat's times: USER_HZ, 100 on Linux.
const userHZ = 100

// cpuTimes is one CPU's time in /proc/stat, in USER_HZ ticks: busy (user,
// nice, system, irq and softirq), idle (idle and iowait) and stolen by
// the hypervisor from a virtual machine.
type cpuTimes struct {
	busy, idle, steal uint64
}

// machineTimes are every CPU's times, by CPU number, read at one moment.
type machineTimes []cpuTimes

// readMachineTimes reads every CPU's times from /proc/stat; nil where the
// machine has none (not Linux), so that a run elsewhere only loses the
// line it reports.
func readMachineTimes() machineTimes {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out machineTimes
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if t, ok := parseCPULine(sc.Text()); ok {
			out = append(out, t)
		}
	}
	return out
}

// parseCPULine reads a "cpuN ..." line of /proc/stat; the "cpu" line of
// the whole machine and every other line are skipped.
func parseCPULine(line string) (cpuTimes, bool) {
	fields := strings.Fields(line)
	if len(fields) < 9 || !strings.HasPrefix(fields[0], "cpu") || fields[0] == "cpu" {
		return cpuTimes{}, false
	}
	var v [8]uint64
	for i := range v {
		n, err := strconv.ParseUint(fields[i+1], 10, 64)
		if err != nil {
			return cpuTimes{}, false
		}
		v[i] = n
	}
	user, nice, system, idle, iowait, irq, softirq, steal := v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]
	return cpuTimes{busy: user + nice + system + irq + softirq, idle: idle + iowait, steal: steal}, true
}

// since is what each CPU spent between earlier and m; nil when either
// reading is missing or the two disagree on the CPUs.
func (m machineTimes) since(earlier machineTimes) machineTimes {
	if len(m) == 0 || len(m) != len(earlier) {
		return nil
	}
	out := make(machineTimes, len(m))
	for i := range m {
		out[i] = cpuTimes{busy: m[i].busy - earlier[i].busy, idle: m[i].idle - earlier[i].idle, steal: m[i].steal - earlier[i].steal}
	}
	return out
}

// markdown reports each CPU's busy, idle and stolen seconds over a
// stretch: whether the manager's CPU was its own, and whether the
// hypervisor took time from a run.
func (m machineTimes) markdown(what string) string {
	if len(m) == 0 {
		return ""
	}
	var parts []string
	for i, t := range m {
		parts = append(parts, fmt.Sprintf("CPU %d busy %.1f s, idle %.1f s, stolen %.2f s", i,
			float64(t.busy)/userHZ, float64(t.idle)/userHZ, float64(t.steal)/userHZ))
	}
	return fmt.Sprintf("\nThe machine's CPUs %s (/proc/stat): %s.\n", what, strings.Join(parts, "; "))
}
