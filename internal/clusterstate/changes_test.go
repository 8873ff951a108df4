package clusterstate

import (
	"testing"

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
