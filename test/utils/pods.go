package utils

import (
	"context"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PodsOf lists the live (not terminating) pods matching labels in namespace.
func PodsOf(ctx context.Context, c client.Client, namespace string, labels map[string]string) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels(labels)); err != nil {
		return nil, fmt.Errorf("list pods %v in %s: %w", labels, namespace, err)
	}
	pods := make([]corev1.Pod, 0, len(list.Items))
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	return pods, nil
}

// Unschedulable reports whether the scheduler has marked the pod
// unschedulable, with the scheduler's message.
func Unschedulable(p corev1.Pod) (bool, string) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true, c.Message
		}
	}
	return false, ""
}

// Running reports whether the pod is bound, Running and Ready.
func Running(p corev1.Pod) bool {
	if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// DeploymentCondition returns the Deployment's condition of the type, if any.
func DeploymentCondition(d *appsv1.Deployment, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == t {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

// RolledOut reports whether every replica of the Deployment's current
// generation is updated and available, as `kubectl rollout status` does.
func RolledOut(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return d.Status.ObservedGeneration >= d.Generation &&
		d.Status.UpdatedReplicas == want &&
		d.Status.Replicas == want &&
		d.Status.AvailableReplicas == want
}

// Placement describes where pods run, "name@node" sorted, for messages.
func Placement(pods []corev1.Pod) string {
	parts := make([]string, 0, len(pods))
	for _, p := range pods {
		node := p.Spec.NodeName
		if node == "" {
			node = "<pending>"
		}
		parts = append(parts, p.Name+"@"+node)
	}
	return strings.Join(parts, ", ")
}

// ObjectKey is a shorthand for the key of a namespaced object.
func ObjectKey(obj metav1.Object) client.ObjectKey {
	return client.ObjectKey{Namespace: obj.GetNamespace(), Name: obj.GetName()}
}
