package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/test/localcluster"
)

// churn is what pod churn in the namespaces of settled migrations cost
// the manager.
type churn struct {
	// podWrites are the pod creations and deletions of the churn.
	podWrites int
	seconds   float64
	cpu       float64
	// idleCPU is the manager's CPU, in cores, over a quiet stretch just
	// before the churn: what the node heartbeats and the manager's own
	// housekeeping cost without pod events.
	idleCPU    float64
	requests   map[string]float64
	reconciles float64
	// podEvents are the pod watch events the manager took in.
	podEvents float64
	// latencies are node-schedulable-to-first-apply times, sorted.
	latencies []time.Duration
	// writes are what the settled migrations wrote, from their creation
	// to the churn's end.
	writes writes
	// recreation is what replacing the apps' pods cost after the churn.
	recreation recreation
	// gatedWrites are what the latency migrations wrote, each waiting
	// for its node, from their creation to Succeeded.
	gatedWrites writes
}

func (c churn) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nChurn: %d pod creations and deletions in %.0f s (%.0f a second) in the namespaces of the settled migrations.\n\n",
		c.podWrites, c.seconds, float64(c.podWrites)/c.seconds)
	fmt.Fprintf(&b, "| figure | during the churn |\n|---|---|\n")
	fmt.Fprintf(&b, "| manager CPU | %.3f cores |\n", c.cpu/c.seconds)
	fmt.Fprintf(&b, "| manager CPU just before, without churn | %.3f cores |\n", c.idleCPU)
	fmt.Fprintf(&b, "| pod watch events taken in | %.0f a second |\n", c.podEvents/c.seconds)
	if c.podEvents > 0 {
		fmt.Fprintf(&b, "| manager CPU a pod event | %.0f µs |\n", c.cpu/c.podEvents*1e6)
	}
	fmt.Fprintf(&b, "| reconciles | %.1f a second |\n", c.reconciles/c.seconds)
	for _, verb := range []string{"GET", "LIST", "PATCH", "PUT", "POST"} {
		fmt.Fprintf(&b, "| API requests %s | %.1f a minute |\n", verb, c.requests["rest_client_requests_total/"+verb]*60/c.seconds)
	}
	b.WriteString(c.recreation.markdown())
	b.WriteString(c.writes.markdown())
	if len(c.gatedWrites.status) > 0 {
		b.WriteString(c.gatedWrites.markdown())
	}
	b.WriteString(latencyMarkdown(c.latencies))
	return b.String()
}

const (
	requestsMetric = "rest_client_requests_total"
	// conflictsKey is the manager's requests refused with 409, as
	// counters sums them.
	conflictsKey     = requestsMetric + "/409"
	reconcilesMetric = "controller_runtime_reconcile_total"
	podEventsMetric  = "placementguard_pod_feed_events_total"
)

// measureChurn settles the migrations (a soft hostname anti-affinity on a
// two-replica Deployment each), then creates and deletes unrelated pods in
// their namespaces at the churn rate and reads what the manager spent.
func measureChurn(ctx context.Context, o options, cluster *localcluster.Cluster, cs kubernetes.Interface, apps []app) (churn, error) {
	c, err := benchClient(cluster.Config)
	if err != nil {
		return churn{}, err
	}
	m, err := startManager(o.manager, cluster.Kubeconfig)
	if err != nil {
		return churn{}, err
	}
	defer m.stop()
	if _, err := m.waitSynced(ctx); err != nil {
		return churn{}, err
	}
	var migrations []client.ObjectKey
	for i := range o.migrations {
		migrations = append(migrations, client.ObjectKey{Namespace: fmt.Sprintf("bench-%02d", i/5%o.namespaces), Name: fmt.Sprintf("guarded-%02d", i)})
	}
	watched, err := watchWrites(ctx, cluster.Config, cs, migrations)
	if err != nil {
		return churn{}, err
	}
	conflictsBefore, err := m.counters(ctx, requestsMetric)
	if err != nil {
		return churn{}, err
	}
	// The migrations move workloads that already run, as they do in a
	// cluster: each path to Succeeded is then the same from run to run,
	// whatever time the pods took to start on a loaded cluster.
	for _, key := range migrations {
		if err := c.Create(ctx, deployment(key)); client.IgnoreAlreadyExists(err) != nil {
			return churn{}, err
		}
	}
	for _, key := range migrations {
		if err := waitAvailable(ctx, cs, key); err != nil {
			return churn{}, err
		}
	}
	for _, key := range migrations {
		if err := c.Create(ctx, migration(key)); client.IgnoreAlreadyExists(err) != nil {
			return churn{}, err
		}
	}
	if err := waitSucceeded(ctx, c, migrations); err != nil {
		return churn{}, fmt.Errorf("%w\n%s", err, m.logTail())
	}
	idle, err := idleCPU(ctx, m, o.idleFor, o.idleProfile)
	if err != nil {
		return churn{}, err
	}
	logf("%d migrations Succeeded, %.3f cores without churn; churning for %s", len(migrations), idle, o.churnFor)
	var podWrites int
	spent, err := whileRunning(ctx, m, o.cpuProfile, o.churnFor, func() (err error) {
		podWrites, err = churnPods(ctx, cs, o, migrations)
		return err
	})
	if err != nil {
		return churn{}, err
	}
	rec, err := measureRecreation(ctx, o, m, cs, apps)
	if err != nil {
		return churn{}, fmt.Errorf("recreation: %w", err)
	}
	w, err := watched.stop()
	if err != nil {
		return churn{}, err
	}
	w.conflicts = spent.after[conflictsKey] - conflictsBefore[conflictsKey]
	out := churn{writes: w, podWrites: podWrites, seconds: spent.seconds, cpu: spent.cpu, idleCPU: idle, requests: spent.counts,
		reconciles: spent.counts[reconcilesMetric], podEvents: spent.counts[podEventsMetric], recreation: rec}
	logf("churn: %.3f cores, %.1f reconciles and %.0f pod events a second", out.cpu/out.seconds, out.reconciles/out.seconds, out.podEvents/out.seconds)
	if out.latencies, out.gatedWrites, err = gatedMigrations(ctx, cluster.Config, c, cs, m, o.latencyMigrations); err != nil {
		return churn{}, fmt.Errorf("%w\n%s", err, m.logTail())
	}
	return out, nil
}

// gatedMigrations times the latency migrations from their node to their
// first write and takes each to Succeeded, counting their writes.
func gatedMigrations(ctx context.Context, cfg *rest.Config, c client.Client, cs kubernetes.Interface, m *manager, n int) ([]time.Duration, writes, error) {
	watched, err := watchWrites(ctx, cfg, cs, latencyKeys(n))
	if err != nil {
		return nil, writes{}, err
	}
	before, err := m.counters(ctx, requestsMetric)
	if err != nil {
		return nil, writes{}, err
	}
	latencies, err := measureLatency(ctx, c, cs, liveCluster{c: c, cs: cs}, n, func(key client.ObjectKey) error {
		return waitSucceeded(ctx, c, []client.ObjectKey{key})
	})
	if err != nil {
		return nil, writes{}, err
	}
	after, err := m.counters(ctx, requestsMetric)
	if err != nil {
		return nil, writes{}, err
	}
	w, err := watched.stop()
	w.about, w.conflicts = gatedAbout, after[conflictsKey]-before[conflictsKey]
	return latencies, w, err
}

// spent is what the manager spent while work ran: its CPU, in seconds,
// and how far its counters of requests, reconciles and pod events moved.
type spent struct {
	seconds, cpu float64
	counts       map[string]float64
	// after are the counters as they stood at the end.
	after map[string]float64
}

// whileRunning runs work and reads what the manager spent meanwhile,
// profiling its CPU to profile, if set, over d.
func whileRunning(ctx context.Context, m *manager, profile string, d time.Duration, work func() error) (spent, error) {
	before, err := m.counters(ctx, requestsMetric, reconcilesMetric, podEventsMetric)
	if err != nil {
		return spent{}, err
	}
	cpuBefore, err := m.cpuSeconds()
	if err != nil {
		return spent{}, err
	}
	start := time.Now()
	profiled := make(chan error, 1)
	go func() { profiled <- m.cpuProfile(ctx, profile, d-5*time.Second) }()
	if err := work(); err != nil {
		return spent{}, err
	}
	out := spent{seconds: time.Since(start).Seconds(), counts: map[string]float64{}}
	cpuAfter, err := m.cpuSeconds()
	if err != nil {
		return spent{}, err
	}
	out.cpu = cpuAfter - cpuBefore
	if out.after, err = m.counters(ctx, requestsMetric, reconcilesMetric, podEventsMetric); err != nil {
		return spent{}, err
	}
	for k, v := range out.after {
		out.counts[k] = v - before[k]
	}
	return out, <-profiled
}

// idleCPU is the manager's CPU, in cores, over the next d, profiled to
// profile if set.
func idleCPU(ctx context.Context, m *manager, d time.Duration, profile string) (float64, error) {
	before, err := m.cpuSeconds()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	profiled := make(chan error, 1)
	go func() { profiled <- m.cpuProfile(ctx, profile, d-2*time.Second) }()
	time.Sleep(d)
	after, err := m.cpuSeconds()
	if err != nil {
		return 0, err
	}
	if err := <-profiled; err != nil {
		return 0, err
	}
	return (after - before) / time.Since(start).Seconds(), nil
}

// churnPods creates a pod and deletes an older one, alternately, at the
// churn rate in the migrations' namespaces, each pod bound to a node and
// labelled as no migration selects.
func churnPods(ctx context.Context, cs kubernetes.Interface, o options, migrations []client.ObjectKey) (int, error) {
	interval := time.Second / time.Duration(o.churnRate)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	deadline := time.Now().Add(o.churnFor)
	var (
		mu      sync.Mutex
		live    []*corev1.Pod
		wg      sync.WaitGroup
		errs    []error
		writes  int
		limiter = make(chan struct{}, 32)
	)
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "churn", UID: "churn"}
	for i := 0; time.Now().Before(deadline); i++ {
		select {
		case <-ctx.Done():
			return writes, ctx.Err()
		case <-ticker.C:
		}
		var write func() error
		mu.Lock()
		if i%2 == 0 || len(live) < 50 {
			key := migrations[rand.IntN(len(migrations))]
			p := app{namespace: key.Namespace, name: "churn", owner: owner}.pod(i, nodeName(rand.IntN(o.nodes)), false)
			p.OwnerReferences = nil
			live = append(live, p)
			write = func() error {
				_, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
				return err
			}
		} else {
			p := live[0]
			live = live[1:]
			write = func() error {
				err := cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
				if apierrors.IsNotFound(err) {
					return nil
				}
				return err
			}
		}
		writes++
		mu.Unlock()
		limiter <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-limiter; wg.Done() }()
			if err := write(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return writes, errors.Join(errs...)
}

func deployment(key client.ObjectKey) *appsv1.Deployment {
	labels := map[string]string{"app": key.Name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "main", Image: "registry.invalid/" + key.Name + ":1",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}}},
					AutomountServiceAccountToken:  ptr.To(false),
					TerminationGracePeriodSeconds: ptr.To[int64](1),
				},
			},
		},
	}
}

func migration(key client.ObjectKey) *pgv1.PlacementMigration {
	return &pgv1.PlacementMigration{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Spec: pgv1.PlacementMigrationSpec{
			Targets:      []pgv1.TargetRef{{Kind: pgv1.KindDeployment, Name: key.Name}},
			Constraint:   pgv1.Constraint{PodAntiAffinity: &pgv1.PodAntiAffinityConstraint{TopologyKey: corev1.LabelHostname}},
			FinalStage:   pgv1.StageSoft,
			SoakDuration: &metav1.Duration{Duration: 2 * time.Second},
			StageTimeout: &metav1.Duration{Duration: 5 * time.Minute},
			Guards:       &pgv1.Guards{MinPodAge: &metav1.Duration{}},
		},
	}
}

func waitSucceeded(ctx context.Context, c client.Client, keys []client.ObjectKey) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	for {
		pending := 0
		var last string
		for _, key := range keys {
			pm := &pgv1.PlacementMigration{}
			if err := c.Get(ctx, key, pm); err != nil {
				return err
			}
			if pm.Status.Phase != pgv1.PhaseSucceeded {
				pending++
				last = fmt.Sprintf("%s: %s", key, pm.Status.Phase)
			}
		}
		if pending == 0 {
			return nil
		}
		logf("migrations not Succeeded yet: %d (%s)", pending, last)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d migrations did not succeed (%s): %w", pending, last, ctx.Err())
		case <-time.After(10 * time.Second):
		}
	}
}
