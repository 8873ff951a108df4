package targets

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// A cached ReplicaSet keeps a fingerprint of its template instead of the
// template: the Deployment's current revision is found the same way, and
// a template that differs in anything but pod-template-hash is not it.
func TestTrimmedReplicaSetsTellTheCurrentRevision(t *testing.T) {
	template := func(image string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", "tier": "front"}, Annotations: map[string]string{"a": "b"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: image, Env: []corev1.EnvVar{{Name: "A", Value: "1"}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}},
		}
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "dep"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Template: template("web:2")}}
	rs := func(name, hash, image string) *appsv1.ReplicaSet {
		tpl := template(image)
		tpl.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
		return &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), OwnerReferences: controllerRef("Deployment", "web", "dep"),
				Labels: map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: hash}, Annotations: map[string]string{"deployment.kubernetes.io/revision": "2"}},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3), Template: tpl},
		}
	}
	for _, tc := range []struct {
		name string
		rss  []*appsv1.ReplicaSet
		want string
	}{
		{"the new revision", []*appsv1.ReplicaSet{rs("web-old", "old", "web:1"), rs("web-new", "new", "web:2")}, "new"},
		{"no revision yet", []*appsv1.ReplicaSet{rs("web-old", "old", "web:1")}, ""},
	} {
		full := FromDeployment(d, tc.rss, nil)
		var trimmed []*appsv1.ReplicaSet
		for _, r := range tc.rss {
			c := r.DeepCopy()
			TrimReplicaSet(c)
			TrimReplicaSet(c) // a resync hands the trimmed ReplicaSet back
			if c.Spec.Template.Spec.Containers != nil || c.Annotations[TemplateFingerprintAnnotation] == "" {
				t.Fatalf("%s: the template is kept: %+v", tc.name, c.Spec.Template)
			}
			if c.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == "" || *c.Spec.Replicas != 3 || c.Annotations["deployment.kubernetes.io/revision"] != "2" || len(c.OwnerReferences) != 1 {
				t.Fatalf("%s: what the operator reads is lost: %+v", tc.name, c)
			}
			trimmed = append(trimmed, c)
		}
		got := FromDeployment(d, trimmed, nil)
		if full.Revision != tc.want || got.Revision != tc.want {
			t.Fatalf("%s: revision %q from full ReplicaSets, %q from trimmed ones, want %q", tc.name, full.Revision, got.Revision, tc.want)
		}
	}
	// Any difference but the hash label is another template.
	same := rs("web-same", "h", "web:2")
	TrimReplicaSet(same)
	changed := d.DeepCopy()
	changed.Spec.Template.Spec.Containers[0].Env[0].Value = "2"
	if !sameTemplate(same, &d.Spec.Template) || sameTemplate(same, &changed.Spec.Template) {
		t.Fatal("the fingerprint does not tell templates apart by content")
	}
}
