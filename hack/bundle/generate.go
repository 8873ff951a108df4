package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Package and channel of the bundle.
const (
	packageName = "placement-guard"
	channel     = "alpha"
	csvFile     = "manifests/placement-guard.clusterserviceversion.yaml"
)

// Sources are the files besides the rendered manifests.
type Sources struct {
	CSVBase    string
	SamplesDir string
}

// Generate returns the bundle's files by path relative to the bundle root.
func Generate(rendered []byte, src Sources) (map[string][]byte, error) {
	objs, err := decodeAll(rendered)
	if err != nil {
		return nil, fmt.Errorf("read the rendered manifests: %w", err)
	}
	csv := map[string]any{}
	if err := readYAML(src.CSVBase, &csv); err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	deployment, account, err := managerDeployment(objs)
	if err != nil {
		return nil, err
	}
	servedByOLM(deployment)
	clusterRules, namespaceRules := rulesBoundTo(objs, account)
	if len(clusterRules) == 0 {
		return nil, fmt.Errorf("no ClusterRole is bound to ServiceAccount %s", account)
	}
	spec := csv["spec"].(map[string]any)
	spec["install"] = map[string]any{
		"strategy": "deployment",
		"spec": map[string]any{
			"clusterPermissions": []any{map[string]any{"serviceAccountName": account, "rules": clusterRules}},
			"permissions":        []any{map[string]any{"serviceAccountName": account, "rules": namespaceRules}},
			"deployments":        []any{map[string]any{"name": deployment.Name, "label": deployment.Labels, "spec": deployment.Spec}},
		},
	}
	if spec["webhookdefinitions"], err = webhookDefinitions(objs, deployment.Name); err != nil {
		return nil, err
	}
	examples, err := samples(src.SamplesDir)
	if err != nil {
		return nil, err
	}
	meta := csv["metadata"].(map[string]any)
	annotations, _ := meta["annotations"].(map[string]any)
	annotations["alm-examples"] = examples
	for _, o := range objs {
		switch o.GetKind() {
		case "CustomResourceDefinition":
			files["manifests/"+o.GetName()+".yaml"], err = marshal(o.Object)
		case "Service":
			if strings.HasSuffix(o.GetName(), webhookServiceSuffix) {
				continue // OLM makes the webhook's Service
			}
			// OLM creates Services of the bundle in the install namespace.
			o.SetNamespace("")
			files["manifests/"+o.GetName()+"_v1_service.yaml"], err = marshal(o.Object)
		case "PriorityClass":
			// The placeholder pods' priority; OLM installs it as it is.
			files["manifests/"+o.GetName()+"_scheduling.k8s.io_v1_priorityclass.yaml"], err = marshal(o.Object)
		}
		if err != nil {
			return nil, err
		}
	}
	if files[csvFile], err = marshal(csv); err != nil {
		return nil, err
	}
	files["metadata/annotations.yaml"], err = marshal(map[string]any{"annotations": map[string]string{
		"operators.operatorframework.io.bundle.mediatype.v1":       "registry+v1",
		"operators.operatorframework.io.bundle.manifests.v1":       "manifests/",
		"operators.operatorframework.io.bundle.metadata.v1":        "metadata/",
		"operators.operatorframework.io.bundle.package.v1":         packageName,
		"operators.operatorframework.io.bundle.channels.v1":        channel,
		"operators.operatorframework.io.bundle.channel.default.v1": channel,
		"operators.operatorframework.io.test.config.v1":            "tests/scorecard/",
		"operators.operatorframework.io.test.mediatype.v1":         "scorecard+v1",
	}})
	if err != nil {
		return nil, err
	}
	files["tests/scorecard/config.yaml"], err = marshal(scorecardConfig())
	return files, err
}

// managerDeployment finds the manager Deployment and its ServiceAccount.
func managerDeployment(objs []*unstructured.Unstructured) (*appsv1.Deployment, string, error) {
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		d := &appsv1.Deployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, d); err != nil {
			return nil, "", err
		}
		if d.Spec.Template.Spec.ServiceAccountName == "" {
			return nil, "", fmt.Errorf("deployment %s names no ServiceAccount", d.Name)
		}
		return d, d.Spec.Template.Spec.ServiceAccountName, nil
	}
	return nil, "", errors.New("no Deployment in the rendered manifests")
}

// rulesBoundTo collects the rules of the ClusterRoles and Roles bound to the
// ServiceAccount: what OLM must grant it.
func rulesBoundTo(objs []*unstructured.Unstructured, account string) (cluster, namespaced []rbacv1.PolicyRule) {
	roles := map[string][]rbacv1.PolicyRule{}
	for _, o := range objs {
		if strings.HasSuffix(o.GetName(), certRoleSuffix) {
			continue // OLM keeps the webhook's certificate
		}
		if o.GetKind() == "ClusterRole" || o.GetKind() == "Role" {
			var r rbacv1.ClusterRole
			if runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r) == nil {
				roles[o.GetKind()+"/"+o.GetName()] = r.Rules
			}
		}
	}
	bound := map[string]bool{}
	for _, o := range objs {
		if o.GetKind() != "ClusterRoleBinding" && o.GetKind() != "RoleBinding" {
			continue
		}
		var b rbacv1.RoleBinding
		if runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b) != nil {
			continue
		}
		for _, s := range b.Subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Name == account {
				bound[b.RoleRef.Kind+"/"+b.RoleRef.Name] = true
			}
		}
	}
	names := make([]string, 0, len(bound))
	for n := range bound {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if strings.HasPrefix(n, "ClusterRole/") {
			cluster = append(cluster, roles[n]...)
		} else {
			namespaced = append(namespaced, roles[n]...)
		}
	}
	return cluster, namespaced
}

// What config/default installs for the manager to keep the admission
// check's certificate itself, which OLM keeps instead.
const (
	webhookServiceSuffix = "-webhook-service"
	certRoleSuffix       = "-webhook-cert"
	// olmCertDir is where OLM mounts the certificate it issues for a
	// webhook definition's container port.
	olmCertDir = "/tmp/k8s-webhook-server/serving-certs"
)

// servedByOLM makes the manager serve the certificate OLM mounts instead
// of keeping one: its --webhook-cert-secret, -hosts and -configuration
// arguments give way to --webhook-cert-path.
func servedByOLM(d *appsv1.Deployment) {
	c := &d.Spec.Template.Spec.Containers[0]
	var args []string
	for _, a := range c.Args {
		switch {
		case strings.HasPrefix(a, "--webhook-cert-secret="):
			args = append(args, "--webhook-cert-path="+olmCertDir)
		case strings.HasPrefix(a, "--webhook-cert-hosts="), strings.HasPrefix(a, "--webhook-configuration="):
		default:
			args = append(args, a)
		}
	}
	c.Args = args
}

// webhookDefinitions turns config/default's webhook configurations (the
// check's and Adopt mode's) into the CSV's: OLM creates the
// configurations, their Service and the certificate, and scopes them to
// the OperatorGroup's namespaces (OLM sets the namespace selector itself).
func webhookDefinitions(objs []*unstructured.Unstructured, deployment string) ([]any, error) {
	types := map[string]string{
		"ValidatingWebhookConfiguration": "ValidatingAdmissionWebhook",
		"MutatingWebhookConfiguration":   "MutatingAdmissionWebhook",
	}
	var out []any
	for _, o := range objs {
		kind, ok := types[o.GetKind()]
		if !ok {
			continue
		}
		// Both kinds spell the fields the CSV takes alike.
		var cfg struct {
			Webhooks []struct {
				Name                    string                                          `json:"name"`
				ClientConfig            admissionregistrationv1.WebhookClientConfig     `json:"clientConfig"`
				AdmissionReviewVersions []string                                        `json:"admissionReviewVersions"`
				SideEffects             *admissionregistrationv1.SideEffectClass        `json:"sideEffects"`
				FailurePolicy           *admissionregistrationv1.FailurePolicyType      `json:"failurePolicy"`
				TimeoutSeconds          *int32                                          `json:"timeoutSeconds"`
				Rules                   []admissionregistrationv1.RuleWithOperations    `json:"rules"`
				ObjectSelector          *metav1.LabelSelector                           `json:"objectSelector"`
				ReinvocationPolicy      *admissionregistrationv1.ReinvocationPolicyType `json:"reinvocationPolicy"`
			} `json:"webhooks"`
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &cfg); err != nil {
			return nil, err
		}
		for _, w := range cfg.Webhooks {
			if w.ClientConfig.Service == nil || w.ClientConfig.Service.Path == nil {
				return nil, fmt.Errorf("webhook %s is not served by a Service path", w.Name)
			}
			def := map[string]any{
				"type":                    kind,
				"generateName":            w.Name,
				"deploymentName":          deployment,
				"containerPort":           9443,
				"targetPort":              9443,
				"webhookPath":             *w.ClientConfig.Service.Path,
				"admissionReviewVersions": w.AdmissionReviewVersions,
				"sideEffects":             w.SideEffects,
				"failurePolicy":           w.FailurePolicy,
				"timeoutSeconds":          w.TimeoutSeconds,
				"rules":                   w.Rules,
			}
			if w.ObjectSelector != nil {
				def["objectSelector"] = w.ObjectSelector
			}
			if w.ReinvocationPolicy != nil {
				def["reinvocationPolicy"] = w.ReinvocationPolicy
			}
			out = append(out, def)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no webhook configuration in the rendered manifests")
	}
	return out, nil
}

// samples turns config/samples into the CSV's alm-examples.
func samples(dir string) (string, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "placementguard_*.yaml"))
	if err != nil {
		return "", err
	}
	sort.Strings(paths)
	var out []map[string]any
	for _, p := range paths {
		obj := map[string]any{}
		if err := readYAML(p, &obj); err != nil {
			return "", err
		}
		out = append(out, obj)
	}
	raw, err := json.MarshalIndent(out, "", "  ")
	return string(raw), err
}

func scorecardConfig() map[string]any {
	test := func(name string) map[string]any {
		return map[string]any{
			"entrypoint": []string{"scorecard-test", name},
			"image":      "quay.io/operator-framework/scorecard-test:v1.39.0",
			"labels":     map[string]string{"suite": strings.SplitN(name, "-", 2)[0], "test": name + "-test"},
		}
	}
	return map[string]any{
		"apiVersion": "scorecard.operatorframework.io/v1alpha3",
		"kind":       "Configuration",
		"metadata":   map[string]string{"name": "config"},
		"stages": []any{map[string]any{"parallel": true, "tests": []any{
			test("basic-check-spec"), test("olm-bundle-validation"), test("olm-crds-have-validation"),
			test("olm-crds-have-resources"), test("olm-spec-descriptors"), test("olm-status-descriptors"),
		}}},
	}
}

func decodeAll(raw []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	dec := k8syaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		o := &unstructured.Unstructured{}
		if err := dec.Decode(&o.Object); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		if len(o.Object) > 0 {
			out = append(out, o)
		}
	}
}

func readYAML(path string, into any) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}

func marshal(v any) ([]byte, error) {
	return yaml.Marshal(v)
}
