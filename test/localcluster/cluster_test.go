package localcluster_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/placement-guard/placement-guard/test/localcluster"
)

// TestClusterSchedulesAndStops starts the whole control plane, adds a node,
// has the real scheduler bind a pod to it and kwok report it Running, then
// stops the cluster and checks that no component is left running.
func TestClusterSchedulesAndStops(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane; run without -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	started := time.Now()
	c, err := localcluster.Start(ctx, localcluster.Options{})
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			c.Stop()
		}
	})
	t.Logf("control plane ready in %s", time.Since(started).Round(time.Millisecond))

	if _, err := c.AddNode(ctx, localcluster.Node{Name: "worker-1", Labels: map[string]string{"topology.kubernetes.io/zone": "a"}}); err != nil {
		t.Fatalf("add node: %v\n%s", err, c.Logs(3000))
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/probe:1"}}},
	}
	if _, err := c.Clientset.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := c.Clientset.CoreV1().Pods("default").Get(ctx, "probe", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.Spec.NodeName == "worker-1" && p.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		t.Fatalf("pod was not scheduled to worker-1 and Running: %v\n%s", err, c.Logs(3000))
	}

	if err := c.CordonNode(ctx, "worker-1"); err != nil {
		t.Fatal(err)
	}
	n, err := c.Clientset.CoreV1().Nodes().Get(ctx, "worker-1", metav1.GetOptions{})
	if err != nil || !n.Spec.Unschedulable {
		t.Fatalf("node not cordoned: %v", err)
	}
	if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeUnschedulable }) {
		t.Fatalf("CordonNode returned before the node lifecycle controller tainted the node: %v", n.Spec.Taints)
	}

	c.Stop()
	stopped = true
	if err := c.Check(); err == nil {
		t.Fatal("after Stop every component must have exited")
	}
	if _, err := c.Clientset.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{}); err == nil {
		t.Fatal("the API server still answers after Stop")
	}
}
