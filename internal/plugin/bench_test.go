package plugin

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
