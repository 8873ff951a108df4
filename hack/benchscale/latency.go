package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// latencyNamespace holds the migrations that wait for their node.
const latencyNamespace = "bench-latency"

// latencyCluster does for the latency migrations what the cluster's
// controllers and kubelets would: a Deployment whose replicas become
// available, and a node that becomes schedulable.
type latencyCluster interface {
	deploy(ctx context.Context, d *appsv1.Deployment) error
	waitAvailable(ctx context.Context, key client.ObjectKey) error
	addNode(ctx context.Context, n *corev1.Node) error
}

// liveCluster is the local cluster: its controllers roll the Deployment
// out, kwok runs its pods and makes the node Ready.
type liveCluster struct {
	c  client.Client
	cs kubernetes.Interface
}

func (l liveCluster) deploy(ctx context.Context, d *appsv1.Deployment) error {
	return l.c.Create(ctx, d)
}

func (l liveCluster) waitAvailable(ctx context.Context, key client.ObjectKey) error {
	return waitAvailable(ctx, l.cs, key)
}

func (l liveCluster) addNode(ctx context.Context, n *corev1.Node) error {
	_, err := l.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	return err
}

// latencyKeys name the n migrations measureLatency times.
func latencyKeys(n int) []client.ObjectKey {
	keys := make([]client.ObjectKey, n)
	for i := range keys {
		keys[i] = client.ObjectKey{Namespace: latencyNamespace, Name: fmt.Sprintf("waiting-%02d", i)}
	}
	return keys
}

// gatedAbout says what the writes of the latency migrations taken to
// Succeeded are of.
const gatedAbout = "capacity-gated migrations (a hostname anti-affinity on a two-replica Deployment, Soft then Hard, each waiting for a node of its own pool that then joins), from their creation to Succeeded"

// measureLatency times, for each of n migrations waiting for a node of
// their own pool, the interval between the node becoming schedulable and
// the migration's first write to its Deployment, as both are seen
// through watches. With succeed set, each migration's final stage is Hard
// and succeed waits for it to succeed before the next is made, so that
// its writes can be counted from creation to Succeeded.
func measureLatency(ctx context.Context, c client.Client, cs kubernetes.Interface, lc latencyCluster, n int, succeed func(client.ObjectKey) error) ([]time.Duration, error) {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: latencyNamespace}}); client.IgnoreAlreadyExists(err) != nil {
		return nil, err
	}
	if _, err := cs.CoreV1().ServiceAccounts(latencyNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); createOrKeep(err) != nil {
		return nil, err
	}
	var out []time.Duration
	for _, key := range latencyKeys(n) {
		pool := "latency-" + key.Name
		if err := lc.deploy(ctx, deployment(key)); err != nil {
			return nil, err
		}
		pm := migration(key)
		pm.Spec.Capacity = &pgv1.Capacity{NodeSelector: pgv1.Labels(map[string]string{"pool": pool}), MinNodes: ptr.To[int32](1), MinDomains: ptr.To[int32](1)}
		if succeed != nil {
			pm.Spec.FinalStage = pgv1.StageHard
		}
		if err := c.Create(ctx, pm); err != nil {
			return nil, err
		}
		if err := waitPhase(ctx, c, key, pgv1.PhaseWaitingForCapacity); err != nil {
			return nil, err
		}
		// The migration also waits for its pods to be Ready; after the
		// churn kwok may take seconds to mark them so, which is not the
		// operator's latency.
		if err := lc.waitAvailable(ctx, key); err != nil {
			return nil, err
		}
		d, err := timeNodeToApply(ctx, cs, lc, key, pool)
		if err != nil {
			pm := &pgv1.PlacementMigration{}
			if getErr := c.Get(ctx, key, pm); getErr == nil {
				err = fmt.Errorf("%w; the migration is %s: %v", err, pm.Status.Phase, pm.Status.Conditions)
			}
			return nil, err
		}
		logf("%s: node schedulable to first apply %s", key, d.Round(time.Millisecond))
		out = append(out, d)
		if succeed != nil {
			if err := succeed(key); err != nil {
				return nil, err
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// timeNodeToApply adds a node to pool and waits for it to become
// schedulable and for the Deployment's template to change.
func timeNodeToApply(ctx context.Context, cs kubernetes.Interface, lc latencyCluster, key client.ObjectKey, pool string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	nodes, err := cs.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{LabelSelector: "pool=" + pool})
	if err != nil {
		return 0, err
	}
	defer nodes.Stop()
	deployments, err := cs.AppsV1().Deployments(key.Namespace).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + key.Name})
	if err != nil {
		return 0, err
	}
	defer deployments.Stop()
	n := node(0)
	n.Name, n.Labels[corev1.LabelHostname] = "bench-"+pool, "bench-"+pool
	n.Labels["pool"] = pool
	if err := lc.addNode(ctx, n); err != nil {
		return 0, err
	}
	var schedulable, applied time.Time
	for schedulable.IsZero() || applied.IsZero() {
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%s: no apply after its node (schedulable at %v): %w", key, schedulable, ctx.Err())
		case e := <-nodes.ResultChan():
			if n, ok := e.Object.(*corev1.Node); ok && e.Type != watch.Deleted && schedulable.IsZero() && nodeSchedulable(n) {
				schedulable = time.Now()
			}
		case e := <-deployments.ResultChan():
			if d, ok := e.Object.(*appsv1.Deployment); ok && applied.IsZero() && d.Generation > 1 {
				applied = time.Now()
			}
		}
	}
	return applied.Sub(schedulable), nil
}

// waitAvailable waits until every replica of the Deployment is available.
func waitAvailable(ctx context.Context, cs kubernetes.Interface, key client.ObjectKey) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		d, err := cs.AppsV1().Deployments(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Spec.Replicas != nil && d.Status.AvailableReplicas == *d.Spec.Replicas && d.Status.ObservedGeneration == d.Generation {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: replicas not available: %w", key, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func nodeSchedulable(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady {
			return false
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func waitPhase(ctx context.Context, c client.Client, key client.ObjectKey, phase pgv1.Phase) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		pm := &pgv1.PlacementMigration{}
		if err := c.Get(ctx, key, pm); err != nil {
			return err
		}
		if pm.Status.Phase == phase {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s is %s, not %s: %w", key, pm.Status.Phase, phase, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// latencyMarkdown reports the first-write latencies.
func latencyMarkdown(ds []time.Duration) string {
	if len(ds) == 0 {
		return ""
	}
	return fmt.Sprintf("\nNode schedulable to first apply, %d migrations: p50 %s, p99 %s, max %s.\n", len(ds),
		quantile(ds, 50).Round(time.Millisecond), quantile(ds, 99).Round(time.Millisecond), quantile(ds, 100).Round(time.Millisecond))
}
