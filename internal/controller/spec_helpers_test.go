package controller

import (
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

func onRole(role string) func(*appsv1.Deployment) {
	return func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "role", Operator: corev1.NodeSelectorOpIn, Values: []string{role}}},
			}}},
		}}
	}
}

func withLabels(labels map[string]string) func(*appsv1.Deployment) {
	return func(d *appsv1.Deployment) {
		d.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
		d.Spec.Template.Labels = labels
	}
}

// poke makes the reconciler look again, as any edit of the object would.
func poke(fc *fakeCluster, name string) {
	pm := fc.pm(name)
	patch := client.MergeFrom(pm.DeepCopy())
	if pm.Annotations == nil {
		pm.Annotations = map[string]string{}
	}
	pm.Annotations["spec.example/poked"] = time.Now().Format(time.RFC3339Nano)
	Expect(k8sClient.Patch(ctx, pm, patch)).To(Succeed())
}

func editSpec(fc *fakeCluster, name string, edit func(*pgv1.PlacementMigrationSpec)) {
	pm := fc.pm(name)
	patch := client.MergeFrom(pm.DeepCopy())
	edit(&pm.Spec)
	Expect(k8sClient.Patch(ctx, pm, patch)).To(Succeed())
}

// webWithRoomToSpread sets up the simplest target: one web pod running on
// the first of two nodes.
func (fc *fakeCluster) webWithRoomToSpread() {
	fc.node("n1", nil)
	fc.node("n2", nil)
	fc.deployment("web", 1)
	fc.rollOut("web", "n1")
}
