package utils

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/test/localcluster"
)

// Env is one spec's share of a shared local cluster: its own namespace and
// its own pool of nodes, both removed by Cleanup.
type Env struct {
	Cluster   *localcluster.Cluster
	Client    client.Client
	Namespace string
	nodes     []string
}

// NewEnv creates a namespace named after prefix with a random suffix.
func NewEnv(ctx context.Context, cluster *localcluster.Cluster, c client.Client, prefix string) (*Env, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: strings.ToLower(prefix) + "-" + rand.String(5),
	}}
	if err := c.Create(ctx, ns); err != nil {
		return nil, fmt.Errorf("create namespace for %s: %w", prefix, err)
	}
	return &Env{Cluster: cluster, Client: c, Namespace: ns.Name}, nil
}

// Pool is the value of PoolLabel on this spec's nodes.
func (e *Env) Pool() string { return e.Namespace }

// NodeName makes a node name unique to this spec.
func (e *Env) NodeName(short string) string { return e.Namespace + "-" + short }

// AddNode adds a node to this spec's pool and waits until it is schedulable.
func (e *Env) AddNode(ctx context.Context, short string, labels map[string]string, taints ...corev1.Taint) (string, error) {
	name := e.NodeName(short)
	all := map[string]string{PoolLabel: e.Pool()}
	for k, v := range labels {
		all[k] = v
	}
	e.nodes = append(e.nodes, name)
	if _, err := e.Cluster.AddNode(ctx, localcluster.Node{Name: name, Labels: all, Taints: taints}); err != nil {
		return "", err
	}
	return name, nil
}

// AddSizedNode is AddNode with the node's allocatable resources.
func (e *Env) AddSizedNode(ctx context.Context, short string, allocatable corev1.ResourceList, taints ...corev1.Taint) (string, error) {
	name := e.NodeName(short)
	e.nodes = append(e.nodes, name)
	if _, err := e.Cluster.AddNode(ctx, localcluster.Node{Name: name, Labels: map[string]string{PoolLabel: e.Pool()}, Taints: taints, Allocatable: allocatable}); err != nil {
		return "", err
	}
	return name, nil
}

// Cleanup deletes the namespace and the spec's nodes.
func (e *Env) Cleanup(ctx context.Context) error {
	var errs []string
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.Namespace}}
	if err := client.IgnoreNotFound(e.Client.Delete(ctx, ns)); err != nil {
		errs = append(errs, err.Error())
	}
	for _, n := range e.nodes {
		if err := e.Cluster.RemoveNode(ctx, n); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("clean up %s: %s", e.Namespace, strings.Join(errs, "; "))
	}
	return nil
}
