// Command demo-fleet plays incident 000 across a fleet of two local
// clusters it starts itself: in eu one data node, in us two. It plans the
// migration across both, shows the matrix, applies it to both, and shows
// us succeeding while eu waits for its second data node with its reason,
// the graph DB untouched; then eu's second data node joins and eu
// succeeds too. Everything started is stopped at the end, also on Ctrl-C.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/plugin"
	"github.com/placement-guard/placement-guard/test/localfleet"
)

var start = time.Now()

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "demo-fleet failed:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	logFile, err := os.CreateTemp("", "placement-guard-demo-fleet-*.log")
	if err != nil {
		return err
	}
	defer logFile.Close()
	ctrl.SetLogger(zap.New(zap.WriteTo(logFile)))
	klog.SetLogger(ctrl.Log)

	say("Starting two local clusters, each with placement-guard (operator log: %s):", logFile.Name())
	say("  eu: one data node (as in incident 000), us: two data nodes")
	f, err := localfleet.Start(ctx, ".", localfleet.Spec{Name: "eu", DataNodes: 1}, localfleet.Spec{Name: "us", DataNodes: 2})
	if err != nil {
		return err
	}
	defer func() {
		say("Stopping the operators and the clusters")
		f.Stop()
	}()
	pm, err := localfleet.Migration(".")
	if err != nil {
		return err
	}
	manifest, err := writeManifest(pm)
	if err != nil {
		return err
	}
	defer os.Remove(manifest)

	say("kubectl placement plan -f graphdb-apart.yaml --contexts eu,us   (nothing is changed)")
	if err := waitPodsSettled(ctx, f, manifest); err != nil {
		return err
	}
	kubectlPlacement(f, "--contexts", "eu,us", "plan", "-f", manifest)

	say("kubectl apply -f graphdb-apart.yaml, to both clusters")
	for _, m := range f.Members {
		if err := m.Client.Create(ctx, pm.DeepCopy()); err != nil {
			return fmt.Errorf("apply to %s: %w", m.Name, err)
		}
	}
	if err := waitPhase(ctx, f.Member("us"), pgv1.PhaseSucceeded); err != nil {
		return err
	}
	if err := waitPhase(ctx, f.Member("eu"), pgv1.PhaseWaitingForCapacity); err != nil {
		return err
	}
	say("kubectl placement status graphdb-apart-from-search --contexts eu,us")
	kubectlPlacement(f, "--contexts", "eu,us", "status", "graphdb-apart-from-search")
	var graph appsv1.Deployment
	if err := f.Member("eu").Client.Get(ctx, client.ObjectKey{Namespace: localfleet.Namespace, Name: "graphdb"}, &graph); err != nil {
		return err
	}
	if graph.Spec.Template.Spec.Affinity != nil {
		return fmt.Errorf("eu's graph DB was changed while its migration waits")
	}
	say("In eu the graph DB's Deployment is untouched (generation %d): no Pending pod, no failed rollout; a wave gate (Argo CD, Flux) holds there", graph.Generation)

	say("eu's second data node joins")
	if err := f.Member("eu").AddDataNode(ctx, "data-2"); err != nil {
		return err
	}
	say("kubectl placement wait graphdb-apart-from-search --contexts eu,us --timeout 3m")
	if code := kubectlPlacement(f, "--contexts", "eu,us", "wait", "graphdb-apart-from-search", "--timeout", "3m"); code != plugin.ExitOK {
		return fmt.Errorf("kubectl placement wait across eu and us exited %d", code)
	}
	kubectlPlacement(f, "--contexts", "eu,us", "status", "graphdb-apart-from-search")
	say("Succeeded in both: the graph DB runs apart from the search engine under a required anti-affinity in every cluster")
	return nil
}

// waitPodsSettled waits until the target pods are older than the
// migration's minPodAge in us, so that the plan says what applying does.
func waitPodsSettled(ctx context.Context, f *localfleet.Fleet, manifest string) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		out, _ := placementOutput(f, "--context", "us", "plan", "-f", manifest)
		return strings.Contains(out, "would apply the Soft stage now"), nil
	})
}

func waitPhase(ctx context.Context, m *localfleet.Member, phase pgv1.Phase) error {
	var pm pgv1.PlacementMigration
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := m.Client.Get(ctx, client.ObjectKey{Namespace: localfleet.Namespace, Name: "graphdb-apart-from-search"}, &pm); err != nil {
			return false, err
		}
		return pm.Status.ObservedGeneration == pm.Generation && pm.Status.Phase == phase, nil
	})
	if err != nil {
		return fmt.Errorf("%s: waiting for %s (phase %s): %w", m.Name, phase, pm.Status.Phase, err)
	}
	say("%s: %s", m.Name, phase)
	return nil
}

func placementOutput(f *localfleet.Fleet, args ...string) (string, int) {
	var out strings.Builder
	code := plugin.Main(append([]string{"--kubeconfig", f.Kubeconfig}, args...), genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	return out.String(), code
}

// kubectlPlacement runs the plugin, prints its output indented and returns
// its exit code.
func kubectlPlacement(f *localfleet.Fleet, args ...string) int {
	out, code := placementOutput(f, args...)
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		fmt.Printf("           %s\n", line)
	}
	if code != plugin.ExitOK {
		fmt.Printf("           (exit %d)\n", code)
	}
	return code
}

func writeManifest(pm *pgv1.PlacementMigration) (string, error) {
	pm = pm.DeepCopy()
	pm.APIVersion, pm.Kind = pgv1.GroupVersion.String(), "PlacementMigration"
	data, err := yaml.Marshal(pm)
	if err != nil {
		return "", err
	}
	path := filepath.Join(os.TempDir(), fmt.Sprintf("placement-guard-demo-fleet-%d.yaml", os.Getpid()))
	return path, os.WriteFile(path, data, 0o644)
}

func say(format string, args ...any) {
	fmt.Printf("[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
}
