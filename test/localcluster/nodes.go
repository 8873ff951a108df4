package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// kwokNodeAnnotation marks the nodes kwok plays the kubelet of.
const kwokNodeAnnotation = "kwok.x-k8s.io/node"

// notReadyTaint is added to every new node by the API server and lifted by
// the node lifecycle controller once the node reports Ready.
const notReadyTaint = "node.kubernetes.io/not-ready"

// Node describes a fake node to add.
type Node struct {
	// Name of the node; also its kubernetes.io/hostname label.
	Name string
	// Labels besides kubernetes.io/hostname, e.g. a zone or a role.
	Labels map[string]string
	// Taints of the node.
	Taints []corev1.Taint
	// Allocatable resources; 16 CPUs, 64Gi of memory and 110 pods when nil.
	Allocatable corev1.ResourceList
	// Unschedulable creates the node cordoned.
	Unschedulable bool
}

// DefaultAllocatable is what a node offers when Node.Allocatable is nil.
func DefaultAllocatable() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("16"),
		corev1.ResourceMemory: resource.MustParse("64Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
}

// AddNode creates a kwok node and waits until it is Ready and the scheduler
// may use it (the not-ready taint is gone).
func (c *Cluster) AddNode(ctx context.Context, n Node) (*corev1.Node, error) {
	labels := map[string]string{
		corev1.LabelHostname: n.Name,
		corev1.LabelOSStable: "linux",
		"type":               "kwok",
	}
	for k, v := range n.Labels {
		labels[k] = v
	}
	alloc := n.Allocatable
	if alloc == nil {
		alloc = DefaultAllocatable()
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        n.Name,
			Labels:      labels,
			Annotations: map[string]string{kwokNodeAnnotation: "fake"},
		},
		Spec: corev1.NodeSpec{Taints: n.Taints, Unschedulable: n.Unschedulable},
		Status: corev1.NodeStatus{
			Allocatable: alloc,
			Capacity:    alloc,
			NodeInfo:    corev1.NodeSystemInfo{Architecture: "amd64", OperatingSystem: "linux", KubeletVersion: "fake"},
		},
	}
	if _, err := c.Clientset.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create node %s: %w", n.Name, err)
	}
	return c.WaitNodeSchedulable(ctx, n.Name)
}

// WaitNodeSchedulable waits until the node is Ready and carries no
// not-ready taint; a node created cordoned stays cordoned.
func (c *Cluster) WaitNodeSchedulable(ctx context.Context, name string) (*corev1.Node, error) {
	return c.waitNode(ctx, name, notReadyTaint)
}

// waitNode waits until the node is Ready and carries none of the taints.
func (c *Cluster) waitNode(ctx context.Context, name string, taints ...string) (*corev1.Node, error) {
	var node *corev1.Node
	err := waitFor(ctx, "node "+name+" to be Ready", c.procs, func(ctx context.Context) error {
		var err error
		if node, err = c.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
		if !nodeReady(node) {
			return fmt.Errorf("node %s is not Ready", name)
		}
		for _, key := range taints {
			if slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key }) {
				return fmt.Errorf("node %s still has the %s taint", name, key)
			}
		}
		return nil
	})
	return node, err
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// RemoveNode deletes a node. Pods bound to it are removed by the pod garbage
// collector of kube-controller-manager.
func (c *Cluster) RemoveNode(ctx context.Context, name string) error {
	err := c.Clientset.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete node %s: %w", name, err)
	}
	return nil
}

// CordonNode marks a node unschedulable, as `kubectl cordon` does, and
// waits until the node lifecycle controller has tainted it so. Returning
// before the taint would let it land after a later UncordonNode has
// returned: the controller acts on what its cache held, and the scheduler
// would then skip a node the caller believes schedulable.
func (c *Cluster) CordonNode(ctx context.Context, name string) error {
	if err := c.setUnschedulable(ctx, name, true); err != nil {
		return err
	}
	return waitFor(ctx, "node "+name+" to be tainted unschedulable", c.procs, func(ctx context.Context) error {
		node, err := c.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeUnschedulable }) {
			return fmt.Errorf("node %s has no %s taint yet", name, corev1.TaintNodeUnschedulable)
		}
		return nil
	})
}

// UncordonNode marks a node schedulable again and waits until the
// scheduler may use it.
func (c *Cluster) UncordonNode(ctx context.Context, name string) error {
	if err := c.setUnschedulable(ctx, name, false); err != nil {
		return err
	}
	// The node lifecycle controller lifts the unschedulable taint a moment
	// after the cordon; until then the scheduler does not use the node.
	_, err := c.waitNode(ctx, name, notReadyTaint, corev1.TaintNodeUnschedulable)
	return err
}

func (c *Cluster) setUnschedulable(ctx context.Context, name string, unschedulable bool) error {
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"unschedulable": unschedulable}})
	if _, err := c.Clientset.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("set unschedulable=%t on node %s: %w", unschedulable, name, err)
	}
	return nil
}

// TaintNode adds a taint to a node, replacing one with the same key and effect.
func (c *Cluster) TaintNode(ctx context.Context, name string, taint corev1.Taint) error {
	return c.updateTaints(ctx, name, func(taints []corev1.Taint) []corev1.Taint {
		taints = slices.DeleteFunc(taints, func(t corev1.Taint) bool { return t.Key == taint.Key && t.Effect == taint.Effect })
		return append(taints, taint)
	})
}

// UntaintNode removes every taint with the key from a node.
func (c *Cluster) UntaintNode(ctx context.Context, name, key string) error {
	return c.updateTaints(ctx, name, func(taints []corev1.Taint) []corev1.Taint {
		return slices.DeleteFunc(taints, func(t corev1.Taint) bool { return t.Key == key })
	})
}

func (c *Cluster) updateTaints(ctx context.Context, name string, change func([]corev1.Taint) []corev1.Taint) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := c.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Spec.Taints = change(node.Spec.Taints)
		_, err = c.Clientset.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("update taints of node %s: %w", name, err)
	}
	return nil
}
