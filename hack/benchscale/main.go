// Command benchscale measures the operator's manager on a local cluster of
// real components (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kwok) with many nodes and pods: what each cached pod
// costs in memory, how long the caches take to sync, and what pod churn
// costs with settled migrations. `make bench-scale` runs it; its results
// are in docs/performance.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/placement-guard/placement-guard/test/localcluster"
)

type options struct {
	nodes, pods, namespaces int
	migrations              int
	latencyMigrations       int
	churnRate               int
	churnFor, settle        time.Duration
	// recreateRate pods of the apps a second are deleted and created
	// again for recreateFor once the churn is over; 0 replaces none.
	recreateRate            int
	recreateFor             time.Duration
	recreateProfile         string
	idleFor                 time.Duration
	idleProfile             string
	manager                 string
	cpuProfile, heapProfile string
	syncCPUProfile          string
	// storeOnly runs no controllers, scheduler or kwok: an API server and
	// etcd alone, pods bound and their status written by the harness. It
	// measures memory and cache sync only, at sizes the full control plane
	// cannot reach on a small machine.
	storeOnly bool
	// apiServerFlags are more flags for the -store-only API server, as
	// name=value pairs: a feature gate of its own work taken out of a
	// comparison, for one.
	apiServerFlags []string
	// admissionRate dry-run Deployment updates a second for admissionFor
	// are sent through the admission check; 0 sends none.
	admissionRate    int
	admissionFor     time.Duration
	admissionProfile string
	admissionTrace   string
	// admissionAPIServerProfile is where the API server's CPU profile
	// during the admission stream goes.
	admissionAPIServerProfile string
	// admissionAPIServerAllocs is where what the API server allocated
	// during the admission stream goes: the difference of its heap
	// profiles before and after, each taken with a collection.
	admissionAPIServerAllocs string
	// admissionCollect asks the API server for a full collection before
	// the stream, so that the stream does not begin on the garbage of the
	// check's manager's first list of every pod.
	admissionCollect bool
	// kustomize renders installConfig, whose admission check the stream's
	// manager is registered with.
	kustomize, installConfig string
}

func main() {
	var o options
	flag.IntVar(&o.nodes, "nodes", 1000, "kwok nodes")
	flag.IntVar(&o.pods, "pods", 30000, "pods bound to them")
	flag.IntVar(&o.namespaces, "namespaces", 50, "namespaces the pods are spread over")
	flag.IntVar(&o.migrations, "migrations", 50, "settled migrations during the churn (5 a namespace)")
	flag.IntVar(&o.latencyMigrations, "latency-migrations", 10, "migrations timed from their node becoming schedulable to their first apply")
	flag.IntVar(&o.churnRate, "churn-rate", 100, "pod creations and deletions a second during the churn")
	flag.IntVar(&o.admissionRate, "admission-rate", 50, "dry-run Deployment updates a second sent through the admission check, half of them judged by the engine; 0 sends none")
	flag.DurationVar(&o.admissionFor, "admission-for", time.Minute, "how long the admission stream lasts")
	flag.StringVar(&o.kustomize, "kustomize", "", "the kustomize binary that renders -install-config; bin/kustomize when empty")
	flag.StringVar(&o.installConfig, "install-config", "config/default", "the kustomization whose ValidatingWebhookConfiguration registers the admission stream's manager (by URL)")
	flag.DurationVar(&o.churnFor, "churn-for", time.Minute, "how long the churn lasts")
	flag.IntVar(&o.recreateRate, "recreate-rate", 100, "pods of the apps deleted and created again a second after the churn, owners and labels kept; 0 replaces none")
	flag.DurationVar(&o.recreateFor, "recreate-for", time.Minute, "how long the recreation lasts")
	flag.StringVar(&o.recreateProfile, "recreate-cpuprofile", "", "write the manager's CPU profile during the recreation here")
	flag.StringVar(&o.idleProfile, "idle-cpuprofile", "", "write the manager's CPU profile without churn, just before it, here")
	flag.DurationVar(&o.idleFor, "idle-for", 30*time.Second, "how long the manager's CPU is read without churn, just before it")
	flag.DurationVar(&o.settle, "settle", 20*time.Second, "how long the manager runs before its memory is read")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write the manager's CPU profile during the churn here")
	flag.StringVar(&o.heapProfile, "heapprofile", "", "write the manager's heap profile with every pod cached here")
	flag.StringVar(&o.syncCPUProfile, "sync-cpuprofile", "", "write the manager's CPU profile over its first minute with every pod here: the first list")
	flag.StringVar(&o.manager, "manager", "", "the manager binary; built from the tree when empty")
	flag.BoolVar(&o.storeOnly, "store-only", false, "an API server and etcd alone, pod status written by the harness: memory and cache sync only")
	flag.IntVar(&managerCore, "manager-core", -1, "run the managers alone on this CPU, and the harness, API server and etcd on the others, as the manager's own container and a control plane elsewhere would be; -1 shares every CPU")
	flag.StringVar(&o.admissionProfile, "admission-cpuprofile", "", "write the manager's CPU profile during the admission stream here")
	flag.StringVar(&o.admissionAPIServerProfile, "admission-apiserver-cpuprofile", "", "write the API server's CPU profile during the admission stream here")
	flag.BoolVar(&o.admissionCollect, "admission-collect", true, "ask the API server for a full collection (its heap profile with gc=1) just before the admission stream, so the stream does not begin on the garbage of the check's manager's first list; false streams on whatever the API server holds")
	flag.StringVar(&o.admissionAPIServerAllocs, "admission-apiserver-allocprofile", "", "write what the API server allocated during the admission stream here (the difference of its heap profiles, each taken with a full collection, before and after the stream; implies -admission-collect)")
	flag.StringVar(&o.admissionTrace, "admission-trace", "", "write the manager's execution trace during the admission stream here (go tool trace)")
	flag.IntVar(&managerCPUs, "manager-cpus", 1, "GOMAXPROCS of the manager, as its container's CPU limit sets it (1 in config/manager); 0 leaves the machine's")
	memory := flag.String("manager-memory", "", "the memory limit of the manager's container (256Mi); the manager is given 90% of it as Go's soft limit (GOMEMLIMIT), as its --memory-limit-ratio sets it from the cgroup in a container; empty for none")
	logPath := flag.String("manager-log", "", "append the managers' logs to this file")
	apiFlags := flag.String("apiserver-flags", "", "more flags for the -store-only API server, name=value separated by spaces (feature-gates=DetectCacheInconsistency=false takes its periodic comparison of the watch cache with etcd out of a run)")
	flags := flag.String("manager-flags", "", "more flags for the manager, separated by spaces (--zap-log-level=5 logs every reconcile)")
	flag.Parse()
	managerFlags = strings.Fields(*flags)
	o.apiServerFlags = strings.Fields(*apiFlags)
	if *memory != "" {
		q, err := resource.ParseQuantity(*memory)
		if err != nil || q.Value() <= 0 {
			fmt.Fprintf(os.Stderr, "bench-scale: -manager-memory %q is not a memory limit such as 256Mi\n", *memory)
			os.Exit(2)
		}
		managerMemory = q.Value()
	}
	if len(o.apiServerFlags) > 0 && !o.storeOnly {
		fmt.Fprintln(os.Stderr, "bench-scale: -apiserver-flags needs -store-only: the local cluster's API server takes none")
		os.Exit(2)
	}
	if *logPath != "" {
		f, err := os.OpenFile(*logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-scale:", err)
			os.Exit(1)
		}
		defer f.Close()
		managerLog = f
	}
	ctrllog.SetLogger(logr.Discard())
	if err := isolateManagerCore(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		os.Exit(1)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, o options) error {
	work, err := os.MkdirTemp("", "bench-scale-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if o.manager == "" {
		o.manager = filepath.Join(work, "manager")
		logf("building the manager")
		build := exec.CommandContext(ctx, "go", "build", "-o", o.manager, "./cmd")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build the manager: %w", err)
		}
	}
	if o.kustomize == "" {
		// Both modes render the shipped webhook for the admission stream.
		bin, err := localcluster.FindBinaries()
		if err != nil {
			return err
		}
		o.kustomize = filepath.Join(bin, "kustomize")
	}
	if o.storeOnly {
		return runStoreOnly(ctx, o, work)
	}
	logf("starting the local cluster")
	cluster, err := localcluster.Start(ctx, localcluster.Options{StartTimeout: 5 * time.Minute})
	if err != nil {
		return err
	}
	defer cluster.Stop()
	if _, err := envtest.InstallCRDs(cluster.Config, envtest.CRDInstallOptions{Paths: []string{"config/crd/bases"}, ErrorIfPathMissing: true}); err != nil {
		return fmt.Errorf("install the CRDs: %w", err)
	}
	fast := rest.CopyConfig(cluster.Config)
	fast.QPS, fast.Burst = 5000, 10000
	cs, err := kubernetes.NewForConfig(fast)
	if err != nil {
		return err
	}
	if err := parallel(ctx, "nodes created", o.nodes, 16, func(ctx context.Context, i int) error {
		_, err := cs.CoreV1().Nodes().Create(ctx, node(i), metav1.CreateOptions{})
		return createOrKeep(err)
	}); err != nil {
		return err
	}

	res := results{options: o}
	if res.base, err = measure(ctx, o, cluster.Kubeconfig, false); err != nil {
		return fmt.Errorf("the manager without pods: %w", err)
	}
	apps, err := createApps(ctx, cs, o.namespaces)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := parallel(ctx, "pods created", o.pods, 32, func(ctx context.Context, i int) error {
		a := apps[i%len(apps)]
		_, err := cs.CoreV1().Pods(a.namespace).Create(ctx, a.pod(i, nodeName(i%o.nodes), i%len(apps) == 0), metav1.CreateOptions{})
		return createOrKeep(err)
	}); err != nil {
		return err
	}
	res.createRate = float64(o.pods) / time.Since(start).Seconds()
	if err := waitPodsRunning(ctx, cs, o.pods); err != nil {
		return err
	}
	if res.loaded, err = measure(ctx, o, cluster.Kubeconfig, true); err != nil {
		return fmt.Errorf("the manager with %d pods: %w", o.pods, err)
	}
	if o.migrations > 0 {
		if res.churn, err = measureChurn(ctx, o, cluster, cs, apps); err != nil {
			return fmt.Errorf("churn: %w", err)
		}
	}
	fmt.Print(res.markdown())
	if o.admissionRate > 0 {
		c, err := benchClient(cluster.Config)
		if err != nil {
			return err
		}
		adm, err := measureAdmission(ctx, o, cluster.Config, c, liveCluster{c: c, cs: cs}, cluster.Kubeconfig)
		if err != nil {
			return fmt.Errorf("admission: %w", err)
		}
		fmt.Print(adm.markdown())
	}
	return nil
}

// started is what a start of the manager cost: its caches' sync, the CPU
// it spent until then, and its memory once settled.
type started struct {
	memory
	sync    time.Duration
	syncCPU float64
}

// measure starts the manager, waits for its caches, lets it settle and
// reads its memory. With every pod (heapProfile), it also profiles the
// manager's first minute if asked.
func measure(ctx context.Context, o options, kubeconfig string, heapProfile bool) (started, error) {
	m, err := startManager(o.manager, kubeconfig)
	if err != nil {
		return started{}, err
	}
	defer m.stop()
	profiled := make(chan error, 1)
	if heapProfile && o.syncCPUProfile != "" {
		go func() { profiled <- m.cpuProfileFromStart(ctx, o.syncCPUProfile, time.Minute) }()
	} else {
		profiled <- nil
	}
	var out started
	if out.sync, err = m.waitSynced(ctx); err != nil {
		return started{}, err
	}
	if out.syncCPU, err = m.cpuSeconds(); err != nil {
		return started{}, err
	}
	logf("caches synced in %s, %.1f s of the manager's CPU; settling for %s", out.sync.Round(time.Millisecond), out.syncCPU, o.settle)
	select {
	case <-ctx.Done():
		return started{}, ctx.Err()
	case <-time.After(o.settle):
	}
	if out.memory, err = m.memory(ctx); err != nil {
		return started{}, err
	}
	if heapProfile {
		if err := m.heapProfile(ctx, o.heapProfile); err != nil {
			return started{}, err
		}
	}
	logf("live heap %s, heap in use %s, RSS %s, highest RSS since start %s", mib(out.live), mib(out.inUse), mib(out.rss), mib(out.peakRSS))
	return out, <-profiled
}

// createApps creates the namespaces and, in each, the owners of its
// apps' pods (ConfigMaps: an owner the garbage collector finds, which no
// controller acts on). It waits for each namespace's default
// ServiceAccount, which admission requires of a pod.
func createApps(ctx context.Context, cs kubernetes.Interface, namespaces int) ([]app, error) {
	var apps []app
	for n := range namespaces {
		ns := fmt.Sprintf("bench-%02d", n)
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); createOrKeep(err) != nil {
			return nil, err
		}
		for a := range 40 {
			name := fmt.Sprintf("app-%02d", a)
			cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			if err != nil {
				return nil, fmt.Errorf("create the owner %s/%s: %w", ns, name, err)
			}
			apps = append(apps, app{namespace: ns, name: name, owner: metav1.OwnerReference{
				APIVersion: "v1", Kind: "ConfigMap", Name: name, UID: cm.UID, Controller: ptr.To(true)}})
		}
		// No controller makes it without kube-controller-manager.
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); createOrKeep(err) != nil {
			return nil, err
		}
		if err := waitServiceAccount(ctx, cs, ns); err != nil {
			return nil, err
		}
	}
	return apps, nil
}

func waitServiceAccount(ctx context.Context, cs kubernetes.Interface, ns string) error {
	for {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// results are the figures of one run.
type results struct {
	options
	base, loaded started
	createRate   float64
	churn        churn
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// gomaxprocs says what GOMAXPROCS the managers run with.
func gomaxprocs() string {
	procs := fmt.Sprintf("GOMAXPROCS=%d, the machine's", runtime.NumCPU())
	if managerCPUs > 0 {
		procs = fmt.Sprintf("GOMAXPROCS=%d, as its container's CPU limit of %d sets it", managerCPUs, managerCPUs)
	}
	if managerMemory > 0 {
		procs += fmt.Sprintf("; GOMEMLIMIT %s, as its container's memory limit of %s sets it", mib(softMemoryLimit(managerMemory)), mib(managerMemory))
	}
	return procs
}

func perPod(loaded, base int64, pods int) string {
	return fmt.Sprintf("%.2f KiB", float64(loaded-base)/float64(pods)/1024)
}

func (r results) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## %d nodes, %d pods in %d namespaces\n\n", r.nodes, r.pods, r.namespaces)
	fmt.Fprintf(&b, "The manager runs with %s.\n\n", gomaxprocs())
	fmt.Fprintf(&b, "| figure | 0 pods | %d pods | per pod |\n|---|---|---|---|\n", r.pods)
	fmt.Fprintf(&b, "| live heap | %s | %s | %s |\n", mib(r.base.live), mib(r.loaded.live), perPod(r.loaded.live, r.base.live, r.pods))
	fmt.Fprintf(&b, "| heap in use | %s | %s | %s |\n", mib(r.base.inUse), mib(r.loaded.inUse), perPod(r.loaded.inUse, r.base.inUse, r.pods))
	fmt.Fprintf(&b, "| RSS | %s | %s | %s |\n", mib(r.base.rss), mib(r.loaded.rss), perPod(r.loaded.rss, r.base.rss, r.pods))
	fmt.Fprintf(&b, "| highest RSS since start (VmHWM) | %s | %s | |\n", mib(r.base.peakRSS), mib(r.loaded.peakRSS))
	fmt.Fprintf(&b, "| cache sync | %s | %s | |\n", r.base.sync.Round(10*time.Millisecond), r.loaded.sync.Round(10*time.Millisecond))
	fmt.Fprintf(&b, "| manager CPU until synced | %.1f s | %.1f s | |\n\n", r.base.syncCPU, r.loaded.syncCPU)
	fmt.Fprintf(&b, "Pods created at %.0f a second.\n", r.createRate)
	if r.migrations > 0 {
		b.WriteString(r.churn.markdown())
	}
	return b.String()
}
