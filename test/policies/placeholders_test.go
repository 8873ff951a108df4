package policies

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/provision"
)

// TestOperatorManagesOnlyItsPlaceholders impersonates the operator's
// ServiceAccount with the right to create and delete Deployments (the
// opt-in placeholders ClusterRole) and shows that the policy lets it
// create, resize and delete the placeholder Deployment exactly as the
// operator builds it, and nothing else with that right.
func TestOperatorManagesOnlyItsPlaceholders(t *testing.T) {
	cfg, scheme, stop := startWithPolicy(t, "operator-writes-placement-only.yaml")
	defer stop()
	ctx := context.Background()
	admin := mustClient(t, cfg, scheme, "")
	must(t, admin.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "operator-placeholders"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}}))
	bind(t, admin, operatorUser, "operator-placeholders")
	operator := mustClient(t, cfg, scheme, operatorUser)

	real := deployment("web")
	must(t, admin.Create(ctx, real))
	// The API server loads a new policy asynchronously: wait until it
	// refuses the operator a Deployment of its own.
	var refusal error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		probe := deployment("probe")
		if refusal = operator.Create(ctx, probe); refusal != nil {
			break
		}
		must(t, admin.Delete(ctx, probe))
	}
	wantRefused(t, refusal, "placement-guard may not create a Deployment")

	owner := &pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "graphdb-apart", UID: types.UID("0b5e8a44-1d8e-4a4c-9f0a-2a3c1f6a7d10")}}
	placeholders := func(name string) *appsv1.Deployment {
		objs, err := provision.Objects(provision.Request{Mode: pgv1.ProvisionPlaceholderPods, Name: name, Owner: owner, Replicas: 1,
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{placement.PlaceholderLabel: string(owner.UID)}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "placeholder", Image: placement.PlaceholderImage}}}}})
		must(t, err)
		d := &appsv1.Deployment{}
		must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, d))
		return d
	}

	// What the operator does with a request.
	mine := placeholders("graphdb-apart-capacity")
	if err := operator.Create(ctx, mine); err != nil {
		t.Fatalf("the placeholder Deployment, as the operator builds it, must be admitted: %v", err)
	}
	resize := &unstructured.Unstructured{}
	resize.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	resize.SetNamespace(ns)
	resize.SetName(mine.Name)
	if err := operator.Patch(ctx, resize, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":3}}`))); err != nil {
		t.Errorf("resizing the placeholders must be admitted: %v", err)
	}
	if err := operator.Delete(ctx, mine); err != nil {
		t.Errorf("deleting the placeholders must be admitted: %v", err)
	}

	// What the right to create Deployments must not become.
	for _, c := range []struct {
		name   string
		change func(*appsv1.Deployment)
	}{
		{"another image", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "registry.example.com/miner:1" }},
		{"a command", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Command = []string{"/bin/sh"} }},
		{"a second container", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: "x", Image: "registry.example.com/x:1"})
		}},
		{"an init container", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "x", Image: "registry.example.com/x:1"}}
		}},
		{"a real priority", func(d *appsv1.Deployment) { d.Spec.Template.Spec.PriorityClassName = "system-node-critical" }},
		{"a token", func(d *appsv1.Deployment) { d.Spec.Template.Spec.AutomountServiceAccountToken = nil }},
		{"a volume", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		}},
		{"the host network", func(d *appsv1.Deployment) { d.Spec.Template.Spec.HostNetwork = true }},
		{"no owning migration", func(d *appsv1.Deployment) { d.OwnerReferences = nil }},
		{"no capacity-request label", func(d *appsv1.Deployment) { delete(d.Labels, "app.kubernetes.io/component") }},
	} {
		d := placeholders("x-capacity")
		c.change(d)
		wantRefused(t, operator.Create(ctx, d), "placement-guard may not create a Deployment")
	}

	must(t, operator.Create(ctx, placeholders("kept-capacity")))
	for _, c := range []struct {
		name   string
		change func(*appsv1.Deployment)
		want   string
	}{
		{"its image changed", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "registry.example.com/miner:1" }, "spec.template.spec.containers"},
		{"its label removed", func(d *appsv1.Deployment) { delete(d.Labels, "app.kubernetes.io/component") }, "labels, annotations, owners or finalizers"},
	} {
		if err := updateDeployment(ctx, operator, "kept-capacity", c.change); err == nil {
			t.Errorf("a placeholder with %s must be refused", c.name)
		} else {
			wantRefused(t, err, c.want)
		}
	}

	// A real workload does not become deletable or rewritable by being
	// dressed as a placeholder.
	dressed := func(d *appsv1.Deployment) {
		p := placeholders(d.Name)
		d.Labels, d.OwnerReferences = p.Labels, p.OwnerReferences
		d.Spec.Template.Spec = p.Spec.Template.Spec
	}
	wantRefused(t, updateDeployment(ctx, operator, "web", dressed), "placement-guard may not change")
	wantRefused(t, operator.Delete(ctx, real), "placement-guard may not delete a Deployment")
}
