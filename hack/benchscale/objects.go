package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// zones the nodes are spread over.
const zones = 10

func nodeName(i int) string { return fmt.Sprintf("bench-node-%05d", i) }

func node(i int) *corev1.Node {
	alloc := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	name := nodeName(i)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				corev1.LabelHostname:               name,
				corev1.LabelOSStable:               "linux",
				corev1.LabelArchStable:             "amd64",
				corev1.LabelTopologyZone:           fmt.Sprintf("zone-%d", i%zones),
				corev1.LabelTopologyRegion:         "region-1",
				"node.kubernetes.io/instance-type": "m7.16xlarge",
				"type":                             "kwok",
			},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
		},
		Status: corev1.NodeStatus{
			Allocatable: alloc,
			Capacity:    alloc,
			NodeInfo:    corev1.NodeSystemInfo{Architecture: "amd64", OperatingSystem: "linux", KubeletVersion: "fake"},
		},
	}
}

// app is one of the apps whose pods fill the cluster: pods of an app share
// labels and a template, as a Deployment's do.
type app struct {
	namespace, name string
	owner           metav1.OwnerReference
}

// pod is a realistic pod of an app, bound to a node: labels, owner, two
// containers with requests, limits, environment, ports and probes, and a
// required anti-affinity for one app in a hundred.
func (a app) pod(i int, nodeName string, antiAffinity bool) *corev1.Pod {
	labels := map[string]string{
		"app.kubernetes.io/name":    a.name,
		"app.kubernetes.io/part-of": a.namespace,
		"app.kubernetes.io/version": "1.4.2",
		"pod-template-hash":         "5d8f7c9b6",
		"team":                      "team-" + a.namespace,
	}
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("main")}},
			PeriodSeconds: 10, TimeoutSeconds: 2, FailureThreshold: 3}
	}
	container := func(name, cpu, memory string, port int32) corev1.Container {
		return corev1.Container{
			Name:  name,
			Image: "registry.invalid/" + a.name + "/" + name + ":1.4.2",
			Args:  []string{"--listen=:8080", "--log-format=json", "--config=/etc/" + a.name + "/config.yaml"},
			Ports: []corev1.ContainerPort{{Name: name, ContainerPort: port, Protocol: corev1.ProtocolTCP}},
			Env: []corev1.EnvVar{
				{Name: "APP_NAME", Value: a.name}, {Name: "APP_ENV", Value: "production"},
				{Name: "LOG_LEVEL", Value: "info"}, {Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: "http://otel-collector.observability:4317"},
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memory)},
			},
			LivenessProbe:  probe("/healthz"),
			ReadinessProbe: probe("/readyz"),
		}
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       a.namespace,
			Name:            fmt.Sprintf("%s-5d8f7c9b6-%06d", a.name, i),
			Labels:          labels,
			Annotations:     map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "8080"},
			OwnerReferences: []metav1.OwnerReference{a.owner},
		},
		Spec: corev1.PodSpec{
			NodeName:                      nodeName,
			Containers:                    []corev1.Container{container("main", "100m", "128Mi", 8080), container("sidecar", "10m", "32Mi", 9090)},
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
			},
		},
	}
	if antiAffinity {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey:   corev1.LabelHostname,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": a.name}},
			}},
		}}
	}
	return p
}

// parallel runs f for 0..n-1 on workers goroutines and returns the first
// error; it reports progress every 10 s.
func parallel(ctx context.Context, what string, n, workers int, f func(context.Context, int) error) error {
	var next, done atomic.Int64
	var once sync.Once
	var firstErr error
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	ticker := time.NewTicker(10 * time.Second)
	defer ticker.Stop()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				logf("%s: %d of %d", what, done.Load(), n)
			}
		}
	}()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(ctx, i); err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if firstErr == nil {
		logf("%s: %d in %s", what, n, time.Since(start).Round(time.Second))
	}
	return firstErr
}

// createOrKeep creates an object, tolerating one that exists.
func createOrKeep(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// waitPodsRunning waits until want pods of the cluster run.
func waitPodsRunning(ctx context.Context, cs kubernetes.Interface, want int) error {
	for {
		running := 0
		cont := ""
		for {
			list, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 5000, Continue: cont, FieldSelector: "status.phase=Running"})
			if err != nil {
				return err
			}
			running += len(list.Items)
			if cont = list.Continue; cont == "" {
				break
			}
		}
		logf("pods running: %d of %d", running, want)
		if running >= want {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(15 * time.Second):
		}
	}
}
