package targets

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

func controllerRef(kind, name string, uid types.UID) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
}

func pod(name string, owners []metav1.OwnerReference) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("pod-" + name), OwnerReferences: owners}}
}

func TestFromDeploymentFindsPodsOfEveryRevision(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "dep"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	rsOld := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-old", UID: "rs-old", OwnerReferences: controllerRef("Deployment", "web", "dep")}}
	rsNew := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-new", UID: "rs-new", OwnerReferences: controllerRef("Deployment", "web", "dep")}}
	rsOther := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-green", UID: "rs-green", OwnerReferences: controllerRef("Deployment", "web-green", "dep-green")}}
	pods := []*corev1.Pod{
		pod("a", controllerRef("ReplicaSet", "web-old", "rs-old")),
		pod("b", controllerRef("ReplicaSet", "web-new", "rs-new")),
		pod("c", controllerRef("ReplicaSet", "web-green", "rs-green")),
		pod("d", nil),
		// An owner reference that is not the controller does not count.
		pod("e", []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-new", UID: "rs-new"}}),
	}
	w := FromDeployment(d, []*appsv1.ReplicaSet{rsOld, rsNew, rsOther}, pods)
	if !slices.Equal(w.Pods, []types.UID{"pod-a", "pod-b"}) {
		t.Fatalf("pods = %v", w.Pods)
	}
	if w.Kind != pgv1.KindDeployment || w.Replicas != 1 || w.Selector == nil {
		t.Fatalf("workload = %+v (replicas default to 1)", w)
	}
}

func TestFromStatefulSet(t *testing.T) {
	s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "sts"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3), VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}}}
	pods := []*corev1.Pod{pod("db-0", controllerRef("StatefulSet", "db", "sts")), pod("other-0", controllerRef("StatefulSet", "other", "sts-2"))}
	w := FromStatefulSet(s, pods)
	if !slices.Equal(w.Pods, []types.UID{"pod-db-0"}) || w.Replicas != 3 || len(w.VolumeClaimTemplates) != 1 {
		t.Fatalf("workload = %+v", w)
	}
}
