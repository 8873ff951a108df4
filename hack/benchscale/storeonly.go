package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// configureAPIServer adds -apiserver-flags to the API server's arguments;
// a flag named twice keeps its last value, as on a command line.
func configureAPIServer(env *envtest.Environment, flags []string) error {
	args := env.ControlPlane.GetAPIServer().Configure()
	for _, f := range flags {
		name, value, ok := strings.Cut(strings.TrimLeft(f, "-"), "=")
		if !ok || name == "" {
			return fmt.Errorf("-apiserver-flags: %q is not name=value", f)
		}
		args.Set(name, value)
		logf("the API server with --%s=%s", name, value)
	}
	return nil
}

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
	if err := configureAPIServer(env, o.apiServerFlags); err != nil {
		return err
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
	// Ready and without the not-ready taint the API server gives a node at
	// creation, as the node lifecycle controller would leave them: the
	// admission stream's judgements count them.
	if err := parallel(ctx, "nodes created", o.nodes, 16, func(ctx context.Context, i int) error {
		return storeCluster{cs: cs}.addNode(ctx, node(i))
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
	var latencies []time.Duration
	if o.latencyMigrations > 0 {
		if latencies, err = measureStoreOnlyLatency(ctx, o, cfg, cs, kubeconfig); err != nil {
			return fmt.Errorf("latency: %w", err)
		}
	}
	fmt.Print(res.markdown())
	fmt.Print(latencyMarkdown(latencies))
	if o.admissionRate > 0 {
		c, err := benchClient(cfg)
		if err != nil {
			return err
		}
		adm, err := measureAdmission(ctx, o, cfg, c, storeCluster{cs: cs}, kubeconfig)
		if err != nil {
			return fmt.Errorf("admission: %w", err)
		}
		fmt.Print(adm.markdown())
	}
	fmt.Println("An API server and etcd alone (-store-only): pods Running because the harness wrote their status, and the latency migrations' and admission stream's Deployments rolled out and nodes made Ready by it; no churn measured.")
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

// measureStoreOnlyLatency times the latency migrations against the API
// server alone, the harness doing what the Deployment and ReplicaSet
// controllers, the kubelets and the node lifecycle controller would.
func measureStoreOnlyLatency(ctx context.Context, o options, cfg *rest.Config, cs kubernetes.Interface, kubeconfig string) ([]time.Duration, error) {
	c, err := benchClient(cfg)
	if err != nil {
		return nil, err
	}
	m, err := startManager(o.manager, kubeconfig)
	if err != nil {
		return nil, err
	}
	defer m.stop()
	if _, err := m.waitSynced(ctx); err != nil {
		return nil, err
	}
	out, err := measureLatency(ctx, c, cs, storeCluster{cs: cs}, o.latencyMigrations, nil)
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, m.logTail())
	}
	return out, nil
}

// storeCluster writes what the cluster's controllers and kubelets would.
type storeCluster struct{ cs kubernetes.Interface }

// deploy creates the Deployment and its rollout as the controllers leave
// it: one ReplicaSet of the Deployment's template, its pods bound and
// Running, every replica available.
func (s storeCluster) deploy(ctx context.Context, d *appsv1.Deployment) error {
	d, err := s.cs.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	const hash = "bench1"
	template := *d.Spec.Template.DeepCopy()
	template.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	selector := d.Spec.Selector.DeepCopy()
	selector.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	rs, err := s.cs.AppsV1().ReplicaSets(d.Namespace).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Name + "-" + hash, Labels: template.Labels,
			Annotations:     map[string]string{"deployment.kubernetes.io/revision": "1"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Replicas: d.Spec.Replicas, Selector: selector, Template: template},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	replicas := *d.Spec.Replicas
	for i := range replicas {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: fmt.Sprintf("%s-%d", rs.Name, i), Labels: template.Labels,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
			Spec: *template.Spec.DeepCopy(),
		}
		p.Spec.NodeName = nodeName(int(i))
		if p, err = s.cs.CoreV1().Pods(d.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return err
		}
		running(p)
		if _, err := s.cs.CoreV1().Pods(d.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	rs.Status = appsv1.ReplicaSetStatus{Replicas: replicas, FullyLabeledReplicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas, ObservedGeneration: rs.Generation}
	if _, err := s.cs.AppsV1().ReplicaSets(d.Namespace).UpdateStatus(ctx, rs, metav1.UpdateOptions{}); err != nil {
		return err
	}
	now := metav1.Now()
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: replicas, UpdatedReplicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", LastUpdateTime: now, LastTransitionTime: now},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", LastUpdateTime: now, LastTransitionTime: now},
		}}
	_, err = s.cs.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
	return err
}

// waitAvailable has nothing to wait for: deploy wrote the rollout whole.
func (s storeCluster) waitAvailable(context.Context, client.ObjectKey) error { return nil }

// addNode creates the node, makes it Ready and lifts the not-ready taint,
// as its kubelet and the node lifecycle controller would.
func (s storeCluster) addNode(ctx context.Context, n *corev1.Node) error {
	status := n.Status
	n, err := s.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	n.Status = status
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if n, err = s.cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return err
	}
	tainted := slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady })
	if !tainted {
		return nil
	}
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady })
	_, err = s.cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	return err
}

// benchClient is a client of the cluster that knows the operator's API.
func benchClient(cfg *rest.Config) (client.WithWatch, error) {
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), pgv1.AddToScheme(scheme)); err != nil {
		return nil, err
	}
	return client.NewWithWatch(cfg, client.Options{Scheme: scheme})
}
