// Command demo plays incident 000 on a local cluster it starts itself: a
// graph DB must be kept apart from a search engine, but only one data node
// exists. placement-guard waits for a second data node, then applies the
// anti-affinity soft, then hard, without touching the search engine or the
// broker. Every phase and condition is printed as it happens; everything
// started is stopped at the end, also on Ctrl-C.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	sigsyaml "sigs.k8s.io/yaml"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/test/localcluster"
	"github.com/placement-guard/placement-guard/test/utils"
)

const (
	namespace = "demo"
	sample    = "config/samples/placementguard_v1alpha1_placementmigration_000_graphdb_apart.yaml"
)

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	// The operator's own log goes to a file; the demo prints the story.
	logFile, err := os.CreateTemp("", "placement-guard-demo-*.log")
	if err != nil {
		return err
	}
	defer logFile.Close()
	ctrl.SetLogger(zap.New(zap.WriteTo(logFile)))
	klog.SetLogger(ctrl.Log)

	say("Starting a local cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok")
	cluster, err := localcluster.Start(ctx, localcluster.Options{})
	if err != nil {
		return fmt.Errorf("start the local cluster: %w", err)
	}
	defer func() {
		say("Stopping the operator and the cluster")
		cluster.Stop()
	}()
	say("Installing the PlacementMigration CRD and starting placement-guard, with its admission check (operator log: %s)", logFile.Name())
	certDir, err := os.MkdirTemp("", "placement-guard-demo-certs-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(certDir)
	caBundle, err := utils.ServingCert(certDir)
	if err != nil {
		return err
	}
	port, err := localcluster.FreePort()
	if err != nil {
		return err
	}
	stop, err := utils.RunOperator(ctx, cluster.Config, utils.OperatorOptions{CRDDir: filepath.Join("config", "crd", "bases"), UnschedulableGrace: 10 * time.Second,
		WebhookPort: port, CertDir: certDir})
	if err != nil {
		return err
	}
	defer func() { _ = stop() }()

	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), pgv1.AddToScheme(scheme)); err != nil {
		return err
	}
	c, err := client.New(cluster.Config, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	if err := utils.RegisterWebhook(ctx, c, "placement-guard-demo", port, caBundle); err != nil {
		return err
	}
	if err := play(ctx, c, cluster); err != nil {
		return err
	}
	return direct(ctx, c, cluster)
}

// direct plays incident 000 once more, as it happened: the constraint
// merged straight into the graph DB's Deployment, no migration, one data
// node. kubectl apply goes through, and kubectl prints what the admission
// check found.
func direct(ctx context.Context, c client.Client, cluster *localcluster.Cluster) error {
	const ns = "demo-direct"
	say("The same change once more, as it happened: kubectl apply straight to the graph DB, no migration, one data node (namespace %s)", ns)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	if _, err := cluster.AddNode(ctx, localcluster.Node{Name: "direct-data-1", Labels: map[string]string{"role": "direct-data"}}); err != nil {
		return err
	}
	for _, name := range []string{"search", "graphdb"} {
		d := utils.RoleDeployment(ns, name, "direct-data")
		if err := c.Create(ctx, d); err != nil {
			return err
		}
	}
	graph := utils.RoleDeployment(ns, "graphdb", "direct-data")
	graph.APIVersion, graph.Kind = "apps/v1", "Deployment"
	graph.Spec.Template.Spec.Affinity = utils.HostnameAntiAffinity(map[string]string{"app": "search"})
	manifest, err := sigsyaml.Marshal(graph)
	if err != nil {
		return err
	}
	bin, err := localcluster.FindBinaries()
	if err != nil {
		return err
	}
	if _, err := waitRunningIn(ctx, c, ns, 2); err != nil {
		return err
	}
	say("kubectl apply --server-side -f graphdb.yaml   (requiredDuringScheduling anti-affinity against app=search)")
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), "--kubeconfig", cluster.Kubeconfig, "apply", "--server-side", "-f", "-")
	cmd.Stdin = bytes.NewReader(manifest)
	out, err := cmd.CombinedOutput()
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fmt.Printf("           %s\n", line)
	}
	if err != nil {
		return fmt.Errorf("kubectl apply: %w", err)
	}
	if !strings.Contains(string(out), "Warning: Deployment/graphdb") {
		return errors.New("kubectl printed no warning of the admission check")
	}
	say("Admitted with that warning (Warn mode); with placementguard.io/admission=Deny on the namespace it is refused, and helm upgrade fails at once with the same words")
	return nil
}

func play(ctx context.Context, c client.Client, cluster *localcluster.Cluster) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return err
	}
	say("One data node and one app node; the search engine and the graph DB share the data node")
	for name, role := range map[string]string{"data-1": "data", "app-1": "app"} {
		if _, err := cluster.AddNode(ctx, localcluster.Node{Name: name, Labels: map[string]string{"role": role}}); err != nil {
			return err
		}
	}
	for _, w := range []struct{ name, role string }{{"search", "data"}, {"graphdb", "data"}, {"broker", "app"}} {
		if err := c.Create(ctx, utils.RoleDeployment(namespace, w.name, w.role)); err != nil {
			return err
		}
	}
	before, err := waitRunning(ctx, c, 3)
	if err != nil {
		return err
	}
	printPods(before)

	pm, err := readSample()
	if err != nil {
		return err
	}
	say("kubectl apply -f %s (soak 10s and minPodAge 5s instead of 5m and 2m, for the demo)", sample)
	if err := c.Create(ctx, pm); err != nil {
		return fmt.Errorf("create the PlacementMigration: %w", err)
	}
	w := &watcher{c: c, key: client.ObjectKeyFromObject(pm)}
	if err := w.until(ctx, func(pm *pgv1.PlacementMigration) bool {
		return pm.Status.Phase == pgv1.PhaseWaitingForCapacity
	}); err != nil {
		return err
	}
	var graph appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "graphdb"}, &graph); err != nil {
		return err
	}
	say("While it waits, the graph DB's Deployment is untouched (generation %d): no Pending pod, no failed helm upgrade", graph.Generation)

	say("A second data node joins")
	if _, err := cluster.AddNode(ctx, localcluster.Node{Name: "data-2", Labels: map[string]string{"role": "data"}}); err != nil {
		return err
	}
	if err := w.until(ctx, func(pm *pgv1.PlacementMigration) bool {
		return pm.Status.Phase == pgv1.PhaseSucceeded || pm.Status.Phase == pgv1.PhaseRolledBack || pm.Status.Phase == pgv1.PhaseBlocked
	}); err != nil {
		return err
	}
	after, err := waitRunning(ctx, c, 3)
	if err != nil {
		return err
	}
	printPods(after)
	return verdict(before, after, w.last)
}

// verdict checks what the demo promises: the graph DB moved, the search
// engine and the broker kept the very same pods.
func verdict(before, after []corev1.Pod, pm *pgv1.PlacementMigration) error {
	if pm.Status.Phase != pgv1.PhaseSucceeded {
		return fmt.Errorf("the migration ended in %s", pm.Status.Phase)
	}
	uids := map[string]corev1.Pod{}
	for _, p := range after {
		uids[p.Name] = p
	}
	for _, p := range before {
		if p.Labels["app"] == "graphdb" {
			continue
		}
		now, ok := uids[p.Name]
		if !ok || now.UID != p.UID || !now.CreationTimestamp.Equal(&p.CreationTimestamp) {
			return fmt.Errorf("protected pod %s was recreated", p.Name)
		}
		say("Protected pod %s: same uid %s, created %s, on %s", p.Name, p.UID, p.CreationTimestamp.UTC().Format(time.TimeOnly), p.Spec.NodeName)
	}
	say("Succeeded: the graph DB runs apart from the search engine under a required anti-affinity")
	return nil
}

// watcher prints every change of the migration's phase and conditions.
type watcher struct {
	c    client.Client
	key  client.ObjectKey
	seen map[string]string
	last *pgv1.PlacementMigration
}

func (w *watcher) until(ctx context.Context, done func(*pgv1.PlacementMigration) bool) error {
	if w.seen == nil {
		w.seen = map[string]string{}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		pm := &pgv1.PlacementMigration{}
		if err := w.c.Get(ctx, w.key, pm); err != nil {
			return err
		}
		w.last = pm
		if pm.Status.ObservedGeneration == pm.Generation {
			w.print(pm)
			if done(pm) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the migration (phase %s): %w", pm.Status.Phase, ctx.Err())
		case <-tick.C:
		}
	}
}

func (w *watcher) print(pm *pgv1.PlacementMigration) {
	if phase := string(pm.Status.Phase); w.seen["phase"] != phase {
		w.seen["phase"] = phase
		say("phase %s", phase)
	}
	conds := append([]metav1.Condition(nil), pm.Status.Conditions...)
	sort.Slice(conds, func(i, j int) bool { return conds[i].Type < conds[j].Type })
	for _, cond := range conds {
		line := fmt.Sprintf("%s=%s %s: %s", cond.Type, cond.Status, cond.Reason, cond.Message)
		if w.seen[cond.Type] != line {
			w.seen[cond.Type] = line
			fmt.Printf("           %s\n", line)
		}
	}
}

func readSample() (*pgv1.PlacementMigration, error) {
	f, err := os.Open(sample)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pm := &pgv1.PlacementMigration{}
	if err := yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(pm); err != nil {
		return nil, fmt.Errorf("read %s: %w", sample, err)
	}
	pm.Namespace = namespace
	pm.Spec.SoakDuration = &metav1.Duration{Duration: 10 * time.Second}
	pm.Spec.StageTimeout = &metav1.Duration{Duration: 5 * time.Minute}
	if pm.Spec.Guards == nil {
		pm.Spec.Guards = &pgv1.Guards{}
	}
	pm.Spec.Guards.MinPodAge = &metav1.Duration{Duration: 5 * time.Second}
	return pm, nil
}

func waitRunning(ctx context.Context, c client.Client, n int) ([]corev1.Pod, error) {
	return waitRunningIn(ctx, c, namespace, n)
}

func waitRunningIn(ctx context.Context, c client.Client, ns string, n int) ([]corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		pods, err := utils.PodsOf(ctx, c, ns, nil)
		if err != nil {
			return nil, err
		}
		running := 0
		for _, p := range pods {
			if utils.Running(p) {
				running++
			}
		}
		if running == n && len(pods) == n {
			return pods, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %d running pods (%s): %w", n, utils.Placement(pods), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func printPods(pods []corev1.Pod) {
	var lines []string
	for _, p := range pods {
		lines = append(lines, fmt.Sprintf("%-10s on %s", p.Labels["app"], p.Spec.NodeName))
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Printf("           %s\n", l)
	}
}

var start = time.Now()

func say(format string, args ...any) {
	fmt.Printf("[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
}
