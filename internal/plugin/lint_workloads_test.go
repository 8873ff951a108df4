package plugin

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/placement-guard/placement-guard/internal/targets"
)

// lint judges a manifest's workload as the operator judges the live one:
// every field the engine reads, podManagementPolicy among them.
func TestLintBuildsWorkloadsAsTheOperatorDoes(t *testing.T) {
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "db:1"}}}}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl,
		PodManagementPolicy: appsv1.ParallelPodManagement,
		UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
	}}
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl,
		Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
	}}
	for _, obj := range []any{sts, deploy} {
		got := workloadOf(obj, "shop")
		want := targets.WorkloadOf(obj)
		want.Namespace = "shop"
		if !reflect.DeepEqual(got, want) {
			t.Errorf("lint's workload differs from the operator's:\nlint:     %+v\noperator: %+v", got, want)
		}
	}
	if got := workloadOf(sts, "shop"); got.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Fatalf("a Parallel StatefulSet is judged as %q", got.PodManagementPolicy)
	}
}
