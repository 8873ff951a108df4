package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/placement-guard/placement-guard/internal/memlimit"
)

// manager is the operator's binary run against the cluster, with its
// metrics and profiles on loopback ports.
type manager struct {
	cmd         *exec.Cmd
	started     time.Time
	metricsAddr string
	pprofAddr   string
	probeAddr   string

	mu   sync.Mutex
	tail []string
	done chan struct{}
}

// startManager starts the manager with the harness's flags, then extra.
func startManager(binary, kubeconfig string, extra ...string) (*manager, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	m := &manager{
		metricsAddr: fmt.Sprintf("127.0.0.1:%d", ports[0]),
		pprofAddr:   fmt.Sprintf("127.0.0.1:%d", ports[1]),
		probeAddr:   fmt.Sprintf("127.0.0.1:%d", ports[2]),
		done:        make(chan struct{}),
	}
	args := []string{
		"--kubeconfig", kubeconfig,
		"--leader-elect=false",
		"--metrics-secure=false",
		"--metrics-bind-address", m.metricsAddr,
		"--pprof-bind-address", m.pprofAddr,
		"--health-probe-bind-address", m.probeAddr,
		// Latencies are a few milliseconds: the log must tell them apart.
		"--zap-time-encoding=rfc3339nano",
	}
	args = append(append(args, managerFlags...), extra...)
	m.cmd = managerCommand(binary, args)
	m.cmd.Env = os.Environ()
	if managerCPUs > 0 {
		// As in its container: Go sizes GOMAXPROCS to the CPU limit.
		m.cmd.Env = append(m.cmd.Env, fmt.Sprintf("GOMAXPROCS=%d", managerCPUs))
	}
	if managerMemory > 0 {
		// As in its container: the manager sets its soft limit to its
		// --memory-limit-ratio of memory.max, which a process outside a
		// cgroup of its own is told through GOMEMLIMIT.
		m.cmd.Env = append(m.cmd.Env, fmt.Sprintf("GOMEMLIMIT=%d", softMemoryLimit(managerMemory)))
	}
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	logs, err := m.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	m.started = time.Now()
	if err := m.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the manager: %w", err)
	}
	go m.read(logs)
	return m, nil
}

// managerLog, when set (-manager-log), receives every line the managers
// log.
var managerLog io.Writer

// managerFlags (-manager-flags) are passed to every manager started.
var managerFlags []string

// managerCPUs (-manager-cpus) is the GOMAXPROCS the managers run with:
// in its container, the Go runtime sets it to the CPU limit, 1 in
// config/manager. 0 leaves the machine's.
var managerCPUs int

// managerMemory (-manager-memory) is the memory limit of the managers'
// container, in bytes; 0 for none, as a manager run outside a container
// has.
var managerMemory int64

// defaultMemoryLimitRatio is the manager's --memory-limit-ratio default:
// the share of its container's memory limit it sets as Go's soft limit.
const defaultMemoryLimitRatio = 0.9

// softMemoryLimit is the soft limit the manager sets itself in a
// container of limit bytes.
func softMemoryLimit(limit int64) int64 {
	return memlimit.Soft(limit, defaultMemoryLimitRatio)
}

// read follows the manager's log, keeping its tail for errors.
func (m *manager) read(r io.Reader) {
	defer close(m.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		m.mu.Lock()
		if managerLog != nil {
			fmt.Fprintln(managerLog, line)
		}
		m.tail = append(m.tail, line)
		if len(m.tail) > 50 {
			m.tail = m.tail[1:]
		}
		m.mu.Unlock()
	}
}

// waitSynced waits until the manager is ready, which it is once the
// engine's pod and node feeds have taken in their first list (cmd's
// "synced" readiness check), and returns how long that took. The first
// "Starting workers" of its log is no measure of it: the manager runs
// several controllers, and the first to start may wait for small caches
// only.
func (m *manager) waitSynced(ctx context.Context) (time.Duration, error) {
	if err := m.waitReady(ctx); err != nil {
		return 0, err
	}
	return time.Since(m.started), nil
}

// waitReady waits for the manager's readiness probe: its caches synced
// and, when it serves the admission check, the webhook server started.
func (m *manager) waitReady(ctx context.Context) error {
	for {
		if _, err := get(ctx, "http://"+m.probeAddr+"/readyz"); err == nil {
			return nil
		}
		select {
		case <-m.done:
			return fmt.Errorf("the manager exited before it was ready:\n%s", m.logTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (m *manager) logTail() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return strings.Join(m.tail, "\n")
}

func (m *manager) stop() {
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(20 * time.Second):
		_ = m.cmd.Process.Kill()
	}
	_ = m.cmd.Wait()
}

// memory is what the manager holds.
type memory struct {
	// live is the heap after a forced collection; inUse the heap's spans
	// in use then; rss the process's resident set, and peakRSS the
	// highest it has been since the process started (the kernel's
	// VmHWM): while its first list streamed, for a manager just started.
	live, inUse, rss, peakRSS int64
}

var memStat = regexp.MustCompile(`(?m)^# (HeapAlloc|HeapInuse) = (\d+)$`)

// memory forces a collection through the heap profile and reads the
// runtime's statistics printed with it, and the kernel's resident set.
func (m *manager) memory(ctx context.Context) (memory, error) {
	heap, err := get(ctx, "http://"+m.pprofAddr+"/debug/pprof/heap?gc=1&debug=1")
	if err != nil {
		return memory{}, err
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", m.cmd.Process.Pid))
	if err != nil {
		return memory{}, err
	}
	return memoryOf(heap, string(status)), nil
}

// memoryOf reads the live heap and the heap in use from a heap profile's
// statistics (debug=1) and the resident set from /proc/<pid>/status.
func memoryOf(heapProfile, procStatus string) memory {
	var out memory
	for _, match := range memStat.FindAllStringSubmatch(heapProfile, -1) {
		v, _ := strconv.ParseInt(match[2], 10, 64)
		switch match[1] {
		case "HeapAlloc":
			out.live = v
		case "HeapInuse":
			out.inUse = v
		}
	}
	for _, line := range strings.Split(procStatus, "\n") {
		if kb, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			out.rss = kibibytes(kb)
		}
		if kb, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			out.peakRSS = kibibytes(kb)
		}
	}
	return out
}

// kibibytes is a /proc/<pid>/status size ("  102400 kB") in bytes.
func kibibytes(field string) int64 {
	v, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(field), "kB")), 10, 64)
	return v << 10
}

// cpuSeconds is the CPU time the manager used so far.
func (m *manager) cpuSeconds() (float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", m.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command name, which is in parentheses.
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100, nil // USER_HZ is 100 on Linux
}

// counters reads the manager's counters of the named metrics.
func (m *manager) counters(ctx context.Context, names ...string) (map[string]float64, error) {
	body, err := get(ctx, "http://"+m.metricsAddr+"/metrics")
	if err != nil {
		return nil, err
	}
	return countersIn(body, names...), nil
}

// countersIn sums the samples of the named metrics on a metrics page by
// name and, where the sample has them, by its method label ("name/GET")
// and by its code label ("name/409").
func countersIn(body string, names ...string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		for _, name := range names {
			if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
				continue
			}
			v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			out[name] += v
			if match := methodLabel.FindStringSubmatch(line); match != nil {
				out[name+"/"+match[1]] += v
			}
			if match := codeLabel.FindStringSubmatch(line); match != nil {
				out[name+"/"+match[1]] += v
			}
		}
	}
	return out
}

var (
	methodLabel = regexp.MustCompile(`method="([A-Z]+)"`)
	codeLabel   = regexp.MustCompile(`code="([0-9]+)"`)
)

// cpuProfile writes the manager's CPU profile over d to path, if set.
func (m *manager) cpuProfile(ctx context.Context, path string, d time.Duration) error {
	return m.record(ctx, "profile", path, d)
}

// executionTrace writes the manager's execution trace over d to path, if
// set: which goroutine ran, waited or was blocked when, for `go tool trace`.
func (m *manager) executionTrace(ctx context.Context, path string, d time.Duration) error {
	return m.record(ctx, "trace", path, d)
}

// record writes what the manager's profiling endpoint of that name records
// over d to path, if set.
func (m *manager) record(ctx context.Context, endpoint, path string, d time.Duration) error {
	if path == "" {
		return nil
	}
	body, err := get(ctx, fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%d", m.pprofAddr, endpoint, int(d.Seconds())))
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(body), 0o644)
}

// cpuProfileFromStart writes the manager's CPU profile over its first d
// to path, starting as soon as its profiling endpoint answers.
func (m *manager) cpuProfileFromStart(ctx context.Context, path string, d time.Duration) error {
	for {
		conn, err := net.DialTimeout("tcp", m.pprofAddr, time.Second)
		if err == nil {
			_ = conn.Close()
			return m.cpuProfile(ctx, path, d-time.Since(m.started))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// heapProfile writes the manager's heap profile to path, if set.
func (m *manager) heapProfile(ctx context.Context, path string) error {
	if path == "" {
		return nil
	}
	body, err := get(ctx, "http://"+m.pprofAddr+"/debug/pprof/heap?gc=1")
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(body), 0o644)
}

func get(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("get %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("get %s: %s", url, resp.Status)
	}
	return string(body), err
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
