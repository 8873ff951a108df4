// Package benchcluster builds the benchmark cluster of docs/performance.md
// (5,000 nodes in 10 zones, 150,000 pods in 50 namespaces, a 100-replica
// Deployment to migrate), for the benchmarks of the engine and of the
// admission check, so that both measure one cluster. It is test support:
// nothing in the operator or the plugin imports it.
package benchcluster

import (
	"fmt"
	"math/rand"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/placement-guard/placement-guard/internal/placement"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// The cluster's size: 30 pods a node, 1% of them with a required hostname
// anti-affinity term.
const (
	Nodes       = 5000
	Zones       = 10
	PodsPerNode = 30
	Replicas    = 100
	Namespaces  = 50
	Apps        = 2000
)

// The Deployment the questions move, and the label its pods are told
// apart by.
const (
	Name     = "checkout"
	AppLabel = "app"
)

// Cluster is the benchmark cluster and the Deployment the questions move:
// "checkout" in team-00, whose 100 pods sit on distinct nodes.
type Cluster struct {
	Objects  placement.Objects
	Workload *placement.Workload
}

var (
	once   sync.Once
	shared *Cluster
)

// Large is the benchmark cluster, built once per process (seeded, so every
// run builds the same one). Callers must not change it.
func Large() *Cluster {
	once.Do(func() { shared = build() })
	return shared
}

func build() *Cluster {
	r := rand.New(rand.NewSource(1))
	var o placement.Objects
	for i := range Namespaces {
		name := fmt.Sprintf("team-%02d", i)
		o.Namespaces = append(o.Namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelMetadataName: name}}})
	}
	for i := range Nodes {
		name := fmt.Sprintf("node-%05d", i)
		o.Nodes = append(o.Nodes, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name, corev1.LabelTopologyZone: fmt.Sprintf("zone-%d", i%Zones)}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("110"),
			}},
		})
	}
	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}
	for i := range Nodes * PodsPerNode {
		ns := fmt.Sprintf("team-%02d", i%Namespaces)
		app := fmt.Sprintf("app-%04d", r.Intn(Apps))
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: ns, Name: fmt.Sprintf("%s-%d", app, i), UID: types.UID(fmt.Sprintf("uid-%d", i)),
				Labels: map[string]string{AppLabel: app, "pod-template-hash": fmt.Sprintf("h%d", r.Intn(3)), "team": ns},
			},
			Spec: corev1.PodSpec{
				NodeName:   o.Nodes[r.Intn(Nodes)].Name,
				Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: req}}},
			},
			Status: corev1.PodStatus{Phase: corev1.PodRunning},
		}
		if i%100 == 0 {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{AppLabel: app}}},
			}}}
		}
		o.Pods = append(o.Pods, p)
	}
	// The Deployment's current pods replace the first 100 pods of team-00,
	// on distinct nodes.
	w := &placement.Workload{Kind: pgv1.KindDeployment, Namespace: "team-00", Name: Name, Replicas: Replicas,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{AppLabel: Name}}}
	w.Template.Labels = map[string]string{AppLabel: Name}
	w.Template.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: req}}}
	for k := range Replicas {
		p := o.Pods[k*Namespaces]
		p.Namespace = "team-00"
		p.Labels = map[string]string{AppLabel: Name, "pod-template-hash": "old"}
		p.Spec.Affinity = nil
		p.Spec.NodeName = o.Nodes[k*37].Name
		w.Pods = append(w.Pods, p.UID)
	}
	return &Cluster{Objects: o, Workload: w}
}

// ZoneSpread is the question's constraint: a zone spread of maxSkew 1
// scoped to the new revision.
func ZoneSpread() placement.Constraint {
	return placement.Constraint{Spread: &placement.Spread{TopologyKey: corev1.LabelTopologyZone, MaxSkew: 1,
		MatchLabelKeys: []string{appsv1.DefaultDeploymentUniqueLabelKey}}}
}

// WithHostnameAntiAffinity is w with a hard hostname anti-affinity among
// its own pods in its template, so a question about it carries both.
func WithHostnameAntiAffinity(w *placement.Workload) *placement.Workload {
	c := *w
	c.Template = *w.Template.DeepCopy()
	c.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
		{TopologyKey: corev1.LabelHostname, LabelSelector: w.Selector, MatchLabelKeys: []string{appsv1.DefaultDeploymentUniqueLabelKey}},
	}}}
	return &c
}
