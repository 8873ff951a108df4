package targets

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A target's pods come from a watch its workload's status may be ahead
// of: ViewGap says so until the pods seen account for what the status
// counts, for every kind.
func TestViewGap(t *testing.T) {
	const hash = "abc"
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-abc", UID: "rs", OwnerReferences: controllerRef("Deployment", "web", "dep"),
		Labels: map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: hash}}}
	deployment := func(status appsv1.DeploymentStatus) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "dep", Generation: 2},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}}},
			Status: status}
		rs.Spec.Template = d.Spec.Template
		rs.Spec.Template.Labels = map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: hash}
		return d
	}
	webPod := func(name, revision string, mutate ...func(*corev1.Pod)) *corev1.Pod {
		p := pod(name, controllerRef("ReplicaSet", "web-abc", "rs"))
		p.Labels = map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: revision}
		for _, m := range mutate {
			m(p)
		}
		return p
	}
	settled := appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2}
	terminating := func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }
	for _, c := range []struct {
		name   string
		status appsv1.DeploymentStatus
		pods   []*corev1.Pod
		says   string
	}{
		{"every pod seen", settled, []*corev1.Pod{webPod("a", hash), webPod("b", hash)}, ""},
		{"the pods appeared, the view has one", settled, []*corev1.Pod{webPod("a", hash)}, "1 of the 2 pods Deployment/web's status counts are seen so far"},
		{"replaced: the view has the old ones, going", settled, []*corev1.Pod{webPod("a", hash, terminating), webPod("b", hash, terminating)}, "0 of the 2 pods"},
		{"the live template's pods not seen yet", settled, []*corev1.Pod{webPod("a", "old"), webPod("b", "old")}, "0 of the 2 pods of Deployment/web's live template"},
		{"the status is of an older generation", appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2}, []*corev1.Pod{webPod("a", hash), webPod("b", hash)},
			"has not yet observed its generation 2"},
		{"the pods not all created yet", appsv1.DeploymentStatus{ObservedGeneration: 2}, nil, "has created 0 of its 2 pods"},
		{"more seen than counted: the status lags, the view does not", appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 1},
			[]*corev1.Pod{webPod("a", hash), webPod("b", hash), webPod("c", hash)}, ""},
	} {
		got := Build(deployment(c.status), []*appsv1.ReplicaSet{rs}, c.pods).ViewGap()
		if c.says == "" && got != "" || !strings.Contains(got, c.says) {
			t.Errorf("%s: %q, want %q", c.name, got, c.says)
		}
	}

	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "sts", Generation: 1},
		Spec:   appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, UpdateRevision: "db-1"}}
	dbPod := func(name string) *corev1.Pod {
		p := pod(name, controllerRef("StatefulSet", "db", "sts"))
		p.Labels = map[string]string{"app": "db", appsv1.ControllerRevisionHashLabelKey: "db-1"}
		return p
	}
	if got := Build(sts, nil, []*corev1.Pod{dbPod("db-0")}).ViewGap(); !strings.Contains(got, "1 of the 2 pods StatefulSet/db's status counts") {
		t.Errorf("a StatefulSet with one of its two pods seen: %q", got)
	}
	if got := Build(sts, nil, []*corev1.Pod{dbPod("db-0"), dbPod("db-1")}).ViewGap(); got != "" {
		t.Errorf("a StatefulSet with its pods seen: %q", got)
	}
}
