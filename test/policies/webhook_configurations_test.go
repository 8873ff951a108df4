package policies

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestOperatorChangesOnlyTheCABundleOfItsWebhooks impersonates the
// operator's ServiceAccount with the rights config/rbac gives it on its
// two webhook configurations (update, by name) and shows that the policy
// lets it change their caBundle, as the certificate rotator does, and
// nothing else: a stolen token cannot add a rule for pods or Secrets,
// point the check elsewhere, turn its failure policy, add or drop a
// webhook, or delete one.
func TestOperatorChangesOnlyTheCABundleOfItsWebhooks(t *testing.T) {
	cfg, scheme, stop := startWithPolicy(t, "operator-writes-cabundle-only.yaml")
	defer stop()
	ctx := context.Background()
	admin := mustClient(t, cfg, scheme, "")
	const validating, mutating = "placement-guard-validating-webhook-configuration", "placement-guard-mutating-webhook-configuration"
	must(t, admin.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "webhook-cert"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations"}, ResourceNames: []string{validating}, Verbs: []string{"get", "update", "patch", "delete"}},
		{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations"}, ResourceNames: []string{mutating}, Verbs: []string{"get", "update", "patch", "delete"}},
		{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"}, Verbs: []string{"create"}},
	}}))
	must(t, admin.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "webhook-cert"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: operatorUser}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "webhook-cert"}}))
	operator := mustClient(t, cfg, scheme, operatorUser)

	url := "https://placement-guard-webhook-service.placement-guard-system.svc:443/validate-workloads"
	rule := admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
		Rule: admissionv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments", "statefulsets"}}}
	check := admissionv1.ValidatingWebhook{Name: "workloads.placementguard.io", ClientConfig: admissionv1.WebhookClientConfig{URL: &url},
		Rules: []admissionv1.RuleWithOperations{rule}, FailurePolicy: ptr.To(admissionv1.Ignore), SideEffects: ptr.To(admissionv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](5)}
	must(t, admin.Create(ctx, &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: validating, Labels: map[string]string{"app.kubernetes.io/name": "placement-guard"}},
		Webhooks: []admissionv1.ValidatingWebhook{check}}))
	adopt := admissionv1.MutatingWebhook{Name: "adopt.workloads.placementguard.io", ClientConfig: admissionv1.WebhookClientConfig{URL: &url},
		Rules: []admissionv1.RuleWithOperations{rule}, FailurePolicy: ptr.To(admissionv1.Ignore), SideEffects: ptr.To(admissionv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](5)}
	must(t, admin.Create(ctx, &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: mutating}, Webhooks: []admissionv1.MutatingWebhook{adopt}}))

	change := func(mutate func(*admissionv1.ValidatingWebhookConfiguration)) error {
		c := &admissionv1.ValidatingWebhookConfiguration{}
		must(t, admin.Get(ctx, client.ObjectKey{Name: validating}, c))
		mutate(c)
		return operator.Update(ctx, c)
	}
	pods := func(c *admissionv1.ValidatingWebhookConfiguration) {
		c.Webhooks[0].Rules = append(c.Webhooks[0].Rules, admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.Create},
			Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods", "secrets"}}})
	}
	// The API server loads a new policy asynchronously: wait until it
	// refuses the operator a rule for pods and Secrets.
	var refusal error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if refusal = change(pods); refusal != nil {
			break
		}
		must(t, admin.Update(ctx, func() *admissionv1.ValidatingWebhookConfiguration {
			c := &admissionv1.ValidatingWebhookConfiguration{}
			must(t, admin.Get(ctx, client.ObjectKey{Name: validating}, c))
			c.Webhooks[0].Rules = []admissionv1.RuleWithOperations{rule}
			return c
		}()))
	}
	wantRefused(t, refusal, "but the caBundle of its webhooks")
	if err := change(func(c *admissionv1.ValidatingWebhookConfiguration) {
		c.Webhooks[0].ClientConfig.CABundle = []byte("authority one")
	}); err != nil {
		t.Fatalf("the operator's caBundle was refused: %v", err)
	}
	m := &admissionv1.MutatingWebhookConfiguration{}
	must(t, admin.Get(ctx, client.ObjectKey{Name: mutating}, m))
	m.Webhooks[0].ClientConfig.CABundle = []byte("authority one")
	if err := operator.Update(ctx, m); err != nil {
		t.Fatalf("Adopt mode's caBundle was refused: %v", err)
	}
	m.Webhooks[0].ReinvocationPolicy = ptr.To(admissionv1.IfNeededReinvocationPolicy)
	wantRefused(t, operator.Update(ctx, m), "but the caBundle of its webhooks")

	elsewhere := "https://collector.example.com/steal"
	for _, c := range []struct {
		name   string
		mutate func(*admissionv1.ValidatingWebhookConfiguration)
		says   string
	}{
		{"a rule for every resource", func(c *admissionv1.ValidatingWebhookConfiguration) { c.Webhooks[0].Rules[0].Resources = []string{"*"} }, "but the caBundle"},
		{"the URL", func(c *admissionv1.ValidatingWebhookConfiguration) { c.Webhooks[0].ClientConfig.URL = &elsewhere }, "but the caBundle"},
		{"the failure policy", func(c *admissionv1.ValidatingWebhookConfiguration) {
			c.Webhooks[0].FailurePolicy = ptr.To(admissionv1.Fail)
		}, "but the caBundle"},
		{"a namespace selector", func(c *admissionv1.ValidatingWebhookConfiguration) {
			c.Webhooks[0].NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}
		}, "but the caBundle"},
		{"a second webhook", func(c *admissionv1.ValidatingWebhookConfiguration) {
			second := c.Webhooks[0]
			second.Name = "secrets.example.com"
			c.Webhooks = append(c.Webhooks, second)
		}, "but the caBundle"},
		{"no webhook", func(c *admissionv1.ValidatingWebhookConfiguration) { c.Webhooks = nil }, "but the caBundle"},
		{"a label", func(c *admissionv1.ValidatingWebhookConfiguration) { c.Labels["team"] = "x" }, "labels, annotations, owners or finalizers"},
	} {
		if err := change(c.mutate); err == nil || !strings.Contains(err.Error(), refusedPrefix) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: want refused with %q, got %v", c.name, c.says, err)
		}
	}
	wantRefused(t, operator.Delete(ctx, &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: validating}}), "may not delete a ValidatingWebhookConfiguration")
	wantRefused(t, operator.Create(ctx, &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "another"}, Webhooks: []admissionv1.ValidatingWebhook{check}}),
		"may not create a ValidatingWebhookConfiguration")
	// Anyone else is not held by it: an administrator changes what they
	// like.
	if err := change(func(*admissionv1.ValidatingWebhookConfiguration) {}); err != nil {
		t.Fatalf("an update that changes nothing: %v", err)
	}
	c := &admissionv1.ValidatingWebhookConfiguration{}
	must(t, admin.Get(ctx, client.ObjectKey{Name: validating}, c))
	c.Webhooks[0].FailurePolicy = ptr.To(admissionv1.Fail)
	if err := admin.Update(ctx, c); err != nil {
		t.Fatalf("the administrator's change was refused: %v", err)
	}
}
