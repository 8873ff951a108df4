package clusterstate

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A namespace that only changes phase or finalizers (one being deleted)
// reaches no migration; one whose labels change may change a term's
// namespaceSelector, and reaches them all.
func TestOnlyANamespacesLabelsAreARelevantChange(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"team": "checkout"}}}
	terminating := ns.DeepCopy()
	terminating.Status.Phase = corev1.NamespaceTerminating
	terminating.Finalizers = []string{"kubernetes"}
	if relevantChange(ns, terminating) {
		t.Error("a namespace being deleted is a relevant change")
	}
	relabelled := ns.DeepCopy()
	relabelled.Labels["team"] = "payments"
	if !relevantChange(ns, relabelled) {
		t.Error("a namespace whose labels changed is not a relevant change")
	}
}

// The objects read for the scheduler's default spread reach a migration
// only when their selector changes: a ReplicaSet's or StatefulSet's
// status changes many times in a rollout, and must not wake every
// migration of its namespace each time.
func TestOnlyASelectorIsARelevantChangeOfWhatSpreadsPods(t *testing.T) {
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1"},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	scaled := rs.DeepCopy()
	scaled.Status.ReadyReplicas = 3
	reselected := rs.DeepCopy()
	reselected.Spec.Selector.MatchLabels["tier"] = "front"
	ss := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}
	ssRolled := ss.DeepCopy()
	ssRolled.Status.UpdatedReplicas = 2
	svc := &corev1.Service{Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}}}
	svcPorts := svc.DeepCopy()
	svcPorts.Spec.Ports = []corev1.ServicePort{{Port: 80}}
	svcReselected := svc.DeepCopy()
	svcReselected.Spec.Selector = map[string]string{"app": "api"}
	rc := &corev1.ReplicationController{Spec: corev1.ReplicationControllerSpec{Selector: map[string]string{"app": "old"}}}
	rcScaled := rc.DeepCopy()
	rcScaled.Status.Replicas = 4
	for _, tc := range []struct {
		name     string
		old, cur any
		want     bool
	}{
		{"a ReplicaSet's status", rs, scaled, false},
		{"a ReplicaSet's selector", rs, reselected, true},
		{"a StatefulSet's status", ss, ssRolled, false},
		{"a Service's ports", svc, svcPorts, false},
		{"a Service's selector", svc, svcReselected, true},
		{"a ReplicationController's status", rc, rcScaled, false},
	} {
		if got := relevantChange(tc.old, tc.cur); got != tc.want {
			t.Errorf("%s: relevant %v, want %v", tc.name, got, tc.want)
		}
	}
}
