package utils

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/certs"
	"github.com/placement-guard/placement-guard/internal/webhook"
)

// ServingCert writes a certificate for 127.0.0.1, signed by an authority
// of its own, into dir as tls.crt and tls.key, the file names the
// manager's flags default to, and returns the authority in PEM for the
// webhook configuration's caBundle.
func ServingCert(dir string) ([]byte, error) {
	keys, err := certs.New([]string{"127.0.0.1", "localhost"}, time.Now(), 24*time.Hour)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, certs.KeyCert), keys.Cert, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, certs.KeyKey), keys.Key, 0o600); err != nil {
		return nil, err
	}
	return keys.Bundle, nil
}

// RegisterWebhook registers the manager's admission check, served at
// 127.0.0.1:port, with the API server by URL, as docs/operations.md tells
// for a manager that runs outside the cluster.
func RegisterWebhook(ctx context.Context, c client.Client, name string, port int, caBundle []byte) error {
	url := fmt.Sprintf("https://127.0.0.1:%d%s", port, webhook.Path)
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "workloads.placementguard.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
			Rules:                   []admissionregistrationv1.RuleWithOperations{CheckRule()},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To[int32](5),
			AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector:       webhookNamespaces(),
			ObjectSelector:          webhookObjects(),
		}},
	}
	return client.IgnoreAlreadyExists(c.Create(ctx, cfg))
}

// CheckRule is what the admission check is sent, as config/webhook says:
// creates and updates of Deployments and StatefulSets, and of their scale.
func CheckRule() admissionregistrationv1.RuleWithOperations {
	r := WebhookRule()
	r.Resources = append(r.Resources, "deployments/scale", "statefulsets/scale")
	return r
}

// RegisterAdoptWebhook registers Adopt mode's mutating webhook, served at
// 127.0.0.1:port beside the check, as config/webhook does.
func RegisterAdoptWebhook(ctx context.Context, c client.Client, name string, port int, caBundle []byte) error {
	url := fmt.Sprintf("https://127.0.0.1:%d%s", port, webhook.AdoptPath)
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "adopt.workloads.placementguard.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
			Rules:                   []admissionregistrationv1.RuleWithOperations{WebhookRule()},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To[int32](5),
			AdmissionReviewVersions: []string{"v1"},
			ReinvocationPolicy:      ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
			NamespaceSelector:       webhookNamespaces(),
			ObjectSelector:          webhookObjects(),
		}},
	}
	return client.IgnoreAlreadyExists(c.Create(ctx, cfg))
}

// webhookNamespaces and webhookObjects select as config/webhook does (the
// install specs compare them).
func webhookNamespaces() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", "placement-guard-system"}},
		{Key: "placementguard.io/admission", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"Off"}},
	}}
}

func webhookObjects() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "placementguard.io/admission", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"Off"}}}}
}

// WebhookRule is what Adopt mode is sent: creates and updates of
// Deployments and StatefulSets.
func WebhookRule() admissionregistrationv1.RuleWithOperations {
	return admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments", "statefulsets"}},
	}
}
