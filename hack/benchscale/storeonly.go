package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// runStoreOnly measures the manager's memory and cache sync against an
// API server and etcd alone: nodes Ready and pods Running because the
// harness writes their status, as kubelets (kwok) would. Nothing else
// watches or updates the pods, so the API server's memory stays within a
// small machine at 150,000 pods.
func runStoreOnly(ctx context.Context, o options, work string) error {
	logf("starting an API server and etcd")
	env := &envtest.Environment{
		BinaryAssetsDirectory: "bin",
		CRDDirectoryPaths:     []string{"config/crd/bases"},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("start the API server: %w", err)
	}
	defer func() { _ = env.Stop() }()
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "bench", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	raw, err := user.KubeConfig()
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(work, "kubeconfig")
	if err := os.WriteFile(kubeconfig, raw, 0o600); err != nil {
		return err
	}
	fast := rest.CopyConfig(cfg)
	fast.QPS, fast.Burst = 5000, 10000
	cs, err := kubernetes.NewForConfig(fast)
	if err != nil {
		return err
	}
	if err := parallel(ctx, "nodes created", o.nodes, 16, func(ctx context.Context, i int) error {
		n, err := cs.CoreV1().Nodes().Create(ctx, node(i), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		n.Status = node(i).Status
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return err
	}
	res := results{options: o}
	if res.base, err = measure(ctx, o, kubeconfig, false); err != nil {
		return fmt.Errorf("the manager without pods: %w", err)
	}
	apps, err := createApps(ctx, cs, o.namespaces)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := parallel(ctx, "pods created and running", o.pods, 32, func(ctx context.Context, i int) error {
		a := apps[i%len(apps)]
		p, err := cs.CoreV1().Pods(a.namespace).Create(ctx, a.pod(i, nodeName(i%o.nodes), i%len(apps) == 0), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		running(p)
		_, err = cs.CoreV1().Pods(a.namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return err
	}
	res.createRate = float64(o.pods) / time.Since(start).Seconds()
	if res.loaded, err = measure(ctx, o, kubeconfig, true); err != nil {
		return fmt.Errorf("the manager with %d pods: %w", o.pods, err)
	}
	res.migrations = 0
	fmt.Print(res.markdown())
	fmt.Println("An API server and etcd alone (-store-only): pods Running because the harness wrote their status; no churn or latency measured.")
	return nil
}

// running writes the status a kubelet would: Running, every condition
// True, both containers ready and running.
func running(p *corev1.Pod) {
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	p.Status.HostIP, p.Status.PodIP = "10.0.0.1", "10.1.0.1"
	p.Status.StartTime = &now
	for _, c := range []corev1.PodConditionType{"PodReadyToStartContainers", corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Ready: true, Started: new(true), Image: c.Image, ImageID: "registry.invalid/sha256:0123456789abcdef",
			ContainerID: "containerd://" + p.Name + "-" + c.Name,
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
}
