package plugin

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// snapshotDir keeps the benchmark's snapshot, to time the binary on it:
// go test ./internal/plugin -run '^$' -bench PlanLarge -benchtime 1x -args -snapshot-dir /tmp/snap
var snapshotDir = flag.String("snapshot-dir", "", "write the large snapshot here and keep it")

// writeLargeSnapshot writes a snapshot directory as `kubectl get -o yaml`
// would: nodes over three zones, and Deployments of pods spread over them,
// one file per kind. It returns the number of bytes written.
func writeLargeSnapshot(tb testing.TB, dir string, nodes, deployments, podsPer int) int64 {
	tb.Helper()
	write := func(name string, f func(w *bufio.Writer)) int64 {
		fh, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			tb.Fatal(err)
		}
		w := bufio.NewWriterSize(fh, 1<<20)
		f(w)
		if err := w.Flush(); err != nil {
			tb.Fatal(err)
		}
		st, _ := fh.Stat()
		fh.Close()
		return st.Size()
	}
	zones := []string{"eu-1a", "eu-1b", "eu-1c"}
	total := write("nodes.yaml", func(w *bufio.Writer) {
		for i := range nodes {
			fmt.Fprintf(w, `---
apiVersion: v1
kind: Node
metadata:
  name: node-%05d
  labels:
    kubernetes.io/hostname: node-%05d
    kubernetes.io/os: linux
    topology.kubernetes.io/zone: %s
    node.kubernetes.io/instance-type: m6i.2xlarge
spec:
  podCIDR: 10.%d.%d.0/24
status:
  allocatable:
    cpu: "8"
    memory: 32Gi
    pods: "110"
  conditions:
  - type: Ready
    status: "True"
    reason: KubeletReady
`, i, i, zones[i%3], i/256, i%256)
		}
	})
	total += write("workloads.yaml", func(w *bufio.Writer) {
		for d := range deployments {
			fmt.Fprintf(w, `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-%04d
  namespace: ns-%02d
  uid: d-%04d
spec:
  replicas: %d
  selector:
    matchLabels:
      app: app-%04d
  template:
    metadata:
      labels:
        app: app-%04d
    spec:
      containers:
      - name: main
        image: registry.example/app:1
        resources:
          requests:
            cpu: 50m
            memory: 64Mi
---
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: app-%04d-5f6d
  namespace: ns-%02d
  uid: rs-%04d
  labels:
    app: app-%04d
    pod-template-hash: 5f6d
  ownerReferences:
  - apiVersion: apps/v1
    kind: Deployment
    name: app-%04d
    uid: d-%04d
    controller: true
spec:
  replicas: %d
  selector:
    matchLabels:
      app: app-%04d
      pod-template-hash: 5f6d
  template:
    metadata:
      labels:
        app: app-%04d
        pod-template-hash: 5f6d
    spec:
      containers:
      - name: main
        image: registry.example/app:1
        resources:
          requests:
            cpu: 50m
            memory: 64Mi
`, d, d%20, d, podsPer, d, d, d, d%20, d, d, d, d, podsPer, d, d)
		}
	})
	total += write("pods.yaml", func(w *bufio.Writer) {
		n := 0
		for d := range deployments {
			for p := range podsPer {
				fmt.Fprintf(w, `---
apiVersion: v1
kind: Pod
metadata:
  name: app-%04d-5f6d-%05d
  namespace: ns-%02d
  uid: p-%04d-%05d
  creationTimestamp: "2026-11-01T10:00:00Z"
  labels:
    app: app-%04d
    pod-template-hash: 5f6d
  ownerReferences:
  - apiVersion: apps/v1
    kind: ReplicaSet
    name: app-%04d-5f6d
    uid: rs-%04d
    controller: true
spec:
  nodeName: node-%05d
  containers:
  - name: main
    image: registry.example/app:1
    resources:
      requests:
        cpu: 50m
        memory: 64Mi
status:
  phase: Running
`, d, p, d%20, d, p, d, d, d, n%nodes)
				n++
			}
		}
	})
	return total
}

// BenchmarkPlanLargeSnapshot is `kubectl placement plan --snapshot` on 5,000
// nodes and 150,000 pods: reading the YAML, indexing it and planning a zone
// spread of one Deployment, end to end. It reports the time of each part.
// Run with `make bench-plugin`; docs/performance.md records the figures.
func BenchmarkPlanLargeSnapshot(b *testing.B) {
	dir := *snapshotDir
	if dir == "" {
		dir = b.TempDir()
	}
	size := writeLargeSnapshot(b, dir, 5000, 1500, 100)
	// The snapshot is on disk before the plugin runs, as a user's is: let
	// the writes reach it first, so that their flush is not timed.
	syscall.Sync()
	b.SetBytes(size)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		c, err := ReadClusterDir(dir)
		if err != nil {
			b.Fatal(err)
		}
		read := time.Since(start)
		report, err := Plan(c, largePlanMigration())
		if err != nil {
			b.Fatal(err)
		}
		if len(report.Stages) != 2 || len(report.Stages[0].Targets) != 1 {
			b.Fatalf("report %+v", report)
		}
		b.ReportMetric(read.Seconds(), "read-s/op")
		b.ReportMetric(time.Since(start).Seconds()-read.Seconds(), "plan-s/op")
		b.ReportMetric(float64(len(c.Pods)), "pods")
	}
}

func largePlanMigration() *pgv1.PlacementMigration {
	return &pgv1.PlacementMigration{
		ObjectMeta: metav1.ObjectMeta{Name: "spread", Namespace: "ns-07"},
		Spec: pgv1.PlacementMigrationSpec{
			Targets:    []pgv1.TargetRef{{Kind: pgv1.KindDeployment, Name: "app-0007"}},
			Constraint: pgv1.Constraint{TopologySpread: &pgv1.TopologySpreadConstraint{TopologyKey: "topology.kubernetes.io/zone", MaxSkew: 1}},
		},
	}
}

// BenchmarkPlanFleetOfSnapshots is `kubectl placement plan --snapshot-dir`
// over 50 clusters of 1,000 nodes and 30,000 pods each, end to end through
// the command line: the matrix's time, and the peak of the live heap
// against the peak of planning one of the snapshots alone. The clusters
// share one snapshot's files through hard links, so the disk holds one.
// docs/performance.md records the figures and the command.
func BenchmarkPlanFleetOfSnapshots(b *testing.B) {
	const clusters = 50
	dir := b.TempDir()
	base := filepath.Join(dir, "base")
	if err := os.Mkdir(base, 0o755); err != nil {
		b.Fatal(err)
	}
	writeLargeSnapshot(b, base, 1000, 300, 100)
	fleetDir := filepath.Join(dir, "fleet")
	files, err := os.ReadDir(base)
	if err != nil {
		b.Fatal(err)
	}
	for k := range clusters {
		member := filepath.Join(fleetDir, fmt.Sprintf("cluster-%02d", k))
		if err := os.MkdirAll(member, 0o755); err != nil {
			b.Fatal(err)
		}
		for _, f := range files {
			if err := os.Link(filepath.Join(base, f.Name()), filepath.Join(member, f.Name())); err != nil {
				b.Fatal(err)
			}
		}
	}
	migration := filepath.Join(dir, "migration.yaml")
	if err := os.WriteFile(migration, []byte(largePlanMigrationYAML), 0o644); err != nil {
		b.Fatal(err)
	}
	syscall.Sync()
	single := peakHeap(b, func() {
		if out, code := runQuiet("plan", "-f", migration, "--snapshot", filepath.Join(fleetDir, "cluster-00"), "-o", "json"); code > ExitHazards {
			b.Fatalf("one cluster: exit %d\n%s", code, out)
		}
	})
	b.ResetTimer()
	for b.Loop() {
		var out string
		start := time.Now()
		peak := peakHeap(b, func() {
			var code int
			if out, code = runQuiet("plan", "-f", migration, "--snapshot-dir", fleetDir, "-o", "json"); code > ExitHazards {
				b.Fatalf("fleet: exit %d\n%s", code, out)
			}
		})
		b.ReportMetric(time.Since(start).Seconds(), "fleet-s/op")
		b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
		b.ReportMetric(float64(single)/(1<<20), "one-snapshot-peak-heap-MiB")
		if n := strings.Count(out, `"cluster": "cluster-`); n != clusters {
			b.Fatalf("%d rows, want %d", n, clusters)
		}
	}
}

const largePlanMigrationYAML = `apiVersion: placementguard.io/v1alpha1
kind: PlacementMigration
metadata:
  name: spread
  namespace: ns-07
spec:
  targets:
    - kind: Deployment
      name: app-0007
  constraint:
    topologySpread:
      topologyKey: topology.kubernetes.io/zone
      maxSkew: 1
`

// runQuiet runs a command line and returns its output and exit code.
func runQuiet(args ...string) (string, int) {
	var out, errOut strings.Builder
	code := Main(args, genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	return out.String() + errOut.String(), code
}

// peakHeap runs f and returns the most heap its objects held meanwhile,
// sampled every 5 ms, from a collected start.
func peakHeap(tb testing.TB, f func()) uint64 {
	tb.Helper()
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak atomic.Uint64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(done)
	<-stopped
	return peak.Load()
}
