package policies

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/placement"
)

// TestOperatorWritesOnlyDeletionCostsOnPods impersonates the operator's
// ServiceAccount with the right to patch pods (the opt-in rebalance
// ClusterRole) and shows that the policy lets it write and remove a pod's
// deletion cost and its mark exactly as the operator sends them, and
// nothing else with that right.
func TestOperatorWritesOnlyDeletionCostsOnPods(t *testing.T) {
	cfg, scheme, stop := startWithPolicy(t, "operator-writes-deletion-costs-only.yaml")
	defer stop()
	ctx := context.Background()
	admin := mustClient(t, cfg, scheme, "")
	must(t, admin.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "operator-pods"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "create", "update", "patch", "delete"}}}}))
	bind(t, admin, operatorUser, "operator-pods")
	operator := mustClient(t, cfg, scheme, operatorUser)

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1", Labels: map[string]string{"app": "web"},
		Annotations: map[string]string{"team.example/owner": "payments"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example.com/web:1"}}}}
	must(t, admin.Create(ctx, pod))
	patch := func(body string) error {
		return operator.Patch(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1"}}, client.RawPatch(types.MergePatchType, []byte(body)))
	}

	// The API server loads a new policy asynchronously: wait until it
	// refuses the operator a label.
	var refusal error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if refusal = patch(`{"metadata":{"labels":{"app":"other"}}}`); refusal != nil {
			break
		}
		must(t, admin.Patch(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1"}}, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"web"}}}`))))
	}
	wantRefused(t, refusal, "may not change the labels, owners, finalizers or spec of pod web-1")

	costBody := `{"metadata":{"uid":"%s","annotations":{"` + corev1.PodDeletionCost + `":%s,"` + placement.DeletionCostMark + `":%s}}}`
	live := &corev1.Pod{}
	must(t, admin.Get(ctx, client.ObjectKeyFromObject(pod), live))
	if err := patch(fmt.Sprintf(costBody, string(live.UID), `"-1"`, `"-1"`)); err != nil {
		t.Fatalf("the operator's cost was refused: %v", err)
	}
	if err := patch(fmt.Sprintf(costBody, string(live.UID), "null", "null")); err != nil {
		t.Fatalf("taking the operator's cost off was refused: %v", err)
	}
	wantRefused(t, patch(`{"metadata":{"annotations":{"team.example/owner":"someone"}}}`), "may not change the annotations of pod web-1")
	wantRefused(t, patch(`{"metadata":{"annotations":{"team.example/owner":null}}}`), "may not change the annotations of pod web-1")
	wantRefused(t, patch(`{"metadata":{"finalizers":["example.com/hold"]}}`), "may not change the labels, owners, finalizers or spec")
	wantRefused(t, patch(`{"spec":{"containers":[{"name":"web","image":"registry.example.com/web:2"}]}}`), "may not change the labels, owners, finalizers or spec")
	wantRefused(t, operator.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1"}}), "may not delete a pod")
	wantRefused(t, operator.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-2"}, Spec: pod.Spec}), "may not create a pod")
}
