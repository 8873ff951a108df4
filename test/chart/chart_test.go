// Package chart tests the Helm chart in dist/chart with the helm built into
// bin/: its defaults install what config/default installs, its policies are
// config/policies', its values are checked by values.schema.json, and each
// value reaches the object it is for.
package chart

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

const namespace = "placement-guard-system"

var root = filepath.Join("..", "..")

func bin(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("PLACEMENT_GUARD_BIN")
	if dir == "" {
		dir = filepath.Join(root, "bin")
	}
	path, err := filepath.Abs(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is not built (make %s): %v", name, filepath.Join("bin", name), err)
	}
	return path
}

func run(t *testing.T, name string, args ...string) ([]byte, error) {
	t.Helper()
	var out, stderr bytes.Buffer
	cmd := exec.Command(bin(t, name), args...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, errors.New(strings.TrimSpace(stderr.String()))
	}
	return out.Bytes(), nil
}

func helmTemplate(t *testing.T, set ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", "placement-guard", filepath.Join(root, "dist", "chart"), "--namespace", namespace}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := run(t, "helm", args...)
	if err != nil {
		t.Fatalf("helm template %v: %v", set, err)
	}
	return decode(t, out)
}

func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	out, err := run(t, "kustomize", "build", filepath.Join(root, "config", dir))
	if err != nil {
		t.Fatalf("kustomize build config/%s: %v", dir, err)
	}
	return decode(t, out)
}

func decode(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatal(err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

// comparable drops what may differ between the two ways to install: the
// objects' own labels (Helm's and kustomize's), and the CRD's keep
// annotation, which only Helm reads.
func comparable(objs []*unstructured.Unstructured, skipKinds ...string) map[string]*unstructured.Unstructured {
	out := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		if slices.Contains(skipKinds, o.GetKind()) {
			continue
		}
		o = o.DeepCopy()
		o.SetLabels(nil)
		ann := o.GetAnnotations()
		delete(ann, "helm.sh/resource-policy")
		o.SetAnnotations(ann)
		if len(ann) == 0 {
			o.SetAnnotations(nil)
		}
		out[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o
	}
	return out
}

func keys(m map[string]*unstructured.Unstructured) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func sameObjects(t *testing.T, what string, got, want map[string]*unstructured.Unstructured) {
	t.Helper()
	if !reflect.DeepEqual(keys(got), keys(want)) {
		t.Fatalf("%s: the chart renders %v, config/ has %v", what, keys(got), keys(want))
	}
	for k, w := range want {
		if !reflect.DeepEqual(got[k].Object, w.Object) {
			g, _ := sigsyaml.Marshal(got[k].Object)
			wy, _ := sigsyaml.Marshal(w.Object)
			t.Errorf("%s: %s differs\nchart:\n%s\nconfig:\n%s", what, k, g, wy)
		}
	}
}

func TestChartDefaultsInstallWhatConfigDefaultInstalls(t *testing.T) {
	// The release's namespace is created by `helm install --create-namespace`
	// or beforehand (with its Pod Security labels), not by the chart.
	sameObjects(t, "defaults",
		comparable(helmTemplate(t, "image.tag=latest")),
		comparable(kustomize(t, "default"), "Namespace"))
}

func TestChartPoliciesAreConfigPolicies(t *testing.T) {
	all := helmTemplate(t, "policies.enable=true")
	var policies []*unstructured.Unstructured
	for _, o := range all {
		if strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") {
			policies = append(policies, o)
		}
	}
	sameObjects(t, "policies", comparable(policies), comparable(kustomize(t, "policies")))
	// The operator's own policies are on by default; the migration's is
	// opt-in, and policies.operatorWrites=false leaves out the others.
	for _, c := range []struct {
		values []string
		want   []string
	}{
		{nil, []string{"operator-writes-cabundle-only", "operator-writes-deletion-costs-only", "operator-writes-placement-only"}},
		{[]string{"policies.operatorWrites=false"}, nil},
	} {
		var got []string
		for _, o := range helmTemplate(t, c.values...) {
			if o.GetKind() == "ValidatingAdmissionPolicy" {
				got = append(got, strings.TrimPrefix(o.GetName(), "placement-guard-"))
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%v: the chart renders the policies %v, want %v", c.values, got, c.want)
		}
	}
}

func TestChartValuesReachTheirObjects(t *testing.T) {
	objs := helmTemplate(t,
		"image.repository=registry.example.com/placement-guard",
		"image.digest=sha256:"+strings.Repeat("ab", 32),
		"replicas=2", "leaderElection.enabled=false",
		"manager.unschedulableGrace=3m", "manager.writeBudget=20", "manager.writeBudgetWindow=30m", "manager.logLevel=debug",
		"priorityClassName=system-cluster-critical", "nodeSelector.pool=system",
		"tolerations[0].key=dedicated", "tolerations[0].operator=Exists",
		"metrics.serviceMonitor.enabled=true", "crd.keep=false", "rbac.userRoles=false", "capacity.placeholderPriorityClass=false")
	byKind := map[string][]*unstructured.Unstructured{}
	for _, o := range objs {
		byKind[o.GetKind()] = append(byKind[o.GetKind()], o)
	}
	manager := byKind["Deployment"][0]
	str := func(fields ...string) string {
		v, _, _ := unstructured.NestedFieldNoCopy(manager.Object, fields...)
		s, _ := sigsyaml.Marshal(v)
		return strings.TrimSpace(string(s))
	}
	container := manager.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	if img := container["image"]; img != "registry.example.com/placement-guard@sha256:"+strings.Repeat("ab", 32) {
		t.Errorf("a digest pins the image: %v", img)
	}
	args, _ := sigsyaml.Marshal(container["args"])
	for _, want := range []string{"--leader-elect=false", "--unschedulable-grace=3m", "--write-budget=20", "--write-budget-window=30m", "--zap-log-level=debug"} {
		if !strings.Contains(string(args), want) {
			t.Errorf("args lack %s:\n%s", want, args)
		}
	}
	if got := str("spec", "replicas"); got != "2" {
		t.Errorf("replicas %s", got)
	}
	if got := str("spec", "template", "spec", "priorityClassName"); got != "system-cluster-critical" {
		t.Errorf("priorityClassName %q", got)
	}
	if got := str("spec", "template", "spec", "nodeSelector"); got != "pool: system" {
		t.Errorf("nodeSelector %q", got)
	}
	if got := str("spec", "template", "spec", "tolerations"); !strings.Contains(got, "key: dedicated") {
		t.Errorf("tolerations %q", got)
	}
	if len(byKind["ServiceMonitor"]) != 1 {
		t.Fatalf("serviceMonitor.enabled renders one ServiceMonitor, got %d", len(byKind["ServiceMonitor"]))
	}
	endpoint, _ := sigsyaml.Marshal(byKind["ServiceMonitor"][0].Object["spec"])
	if !strings.Contains(string(endpoint), "honorLabels: true") {
		t.Errorf("the ServiceMonitor must honour the metrics' namespace label:\n%s", endpoint)
	}
	if ann := byKind["CustomResourceDefinition"][0].GetAnnotations(); ann["helm.sh/resource-policy"] != "" {
		t.Errorf("crd.keep=false must drop the keep annotation: %v", ann)
	}
	if n := len(byKind["PriorityClass"]); n != 0 {
		t.Errorf("capacity.placeholderPriorityClass=false still renders %d PriorityClass", n)
	}
	for _, role := range byKind["ClusterRole"] {
		if strings.Contains(role.GetName(), "placementmigration-") {
			t.Errorf("rbac.userRoles=false still renders %s", role.GetName())
		}
	}
}

func TestChartSchemaRefusesBadValues(t *testing.T) {
	for _, set := range []string{"admission.mode=Adapt", "admission.failurePolicy=Maybe", "admission.timeoutSeconds=60", "admission.certManager.issuerRef.kind=Secret", "replicas=-1", "image.digest=latest", "manager.logLevel=loud", "manager.unschedulableGrace=soon", "typo=1", "manager.extraArgs[0]=leader-elect"} {
		args := []string{"template", "x", filepath.Join(root, "dist", "chart"), "--set", set}
		if _, err := run(t, "helm", args...); err == nil || !strings.Contains(err.Error(), "schema") {
			t.Errorf("--set %s must be refused by values.schema.json, got %v", set, err)
		}
	}
}

func TestChartLints(t *testing.T) {
	out, err := run(t, "helm", "lint", "--strict", filepath.Join(root, "dist", "chart"))
	if err != nil {
		t.Fatalf("helm lint --strict: %v\n%s", err, out)
	}
}

func TestChartWithCertManagerInstallsWhatConfigCertmanagerInstalls(t *testing.T) {
	sameObjects(t, "certManager.enabled",
		comparable(helmTemplate(t, "image.tag=latest", "admission.certManager.enabled=true")),
		comparable(kustomize(t, "certmanager"), "Namespace"))
}

// TestCertmanagerOverlayServesCertManagersCertificate: the overlay's
// index-based patch of the manager's arguments stays true as
// config/default's arguments change.
func TestCertmanagerOverlayServesCertManagersCertificate(t *testing.T) {
	var manager, cert *unstructured.Unstructured
	for _, o := range kustomize(t, "certmanager") {
		switch {
		case o.GetKind() == "Deployment":
			manager = o
		case o.GetKind() == "Certificate":
			cert = o
		case strings.HasSuffix(o.GetName(), "webhook-cert"):
			t.Errorf("%s %s: the manager keeps no certificate under cert-manager", o.GetKind(), o.GetName())
		case o.GetKind() == "ValidatingWebhookConfiguration":
			if got := o.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != namespace+"/placement-guard-serving-cert" {
				t.Errorf("inject-ca-from %q", got)
			}
		}
	}
	args, _, _ := unstructured.NestedSlice(manager.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any), "args")
	text := fmt.Sprint(args)
	if !strings.Contains(text, "--webhook-cert-path=/tmp/k8s-webhook-server/serving-certs") || strings.Contains(text, "--webhook-cert-secret") ||
		strings.Contains(text, "--webhook-cert-hosts") || strings.Contains(text, "--webhook-configuration") || !strings.Contains(text, "--leader-elect") {
		t.Errorf("args %v", text)
	}
	secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	vols, _ := sigsyaml.Marshal(manager.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["volumes"])
	if !strings.Contains(string(vols), "secretName: "+secret) {
		t.Errorf("the manager mounts %s, cert-manager writes %s", vols, secret)
	}
	names, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	if !slices.Contains(names, "placement-guard-webhook-service."+namespace+".svc") {
		t.Errorf("the certificate is for %v, not the webhook Service", names)
	}
}

// kinds sorts rendered objects by kind.
func kinds(objs []*unstructured.Unstructured) map[string][]*unstructured.Unstructured {
	m := map[string][]*unstructured.Unstructured{}
	for _, o := range objs {
		m[o.GetKind()] = append(m[o.GetKind()], o)
	}
	return m
}

// argsOf are the manager's arguments among rendered objects.
func argsOf(objs map[string][]*unstructured.Unstructured) string {
	c := objs["Deployment"][0].Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0]
	return fmt.Sprint(c.(map[string]any)["args"])
}

func TestChartAdmissionValues(t *testing.T) {

	t.Run("mode, failure policy and timeout reach the configuration", func(t *testing.T) {
		objs := kinds(helmTemplate(t, "admission.mode=Deny", "admission.failurePolicy=Fail", "admission.timeoutSeconds=3"))
		if a := argsOf(objs); !strings.Contains(a, "--admission-mode=Deny") {
			t.Errorf("args %s", a)
		}
		hook, _ := sigsyaml.Marshal(objs["ValidatingWebhookConfiguration"][0].Object["webhooks"])
		for _, want := range []string{"failurePolicy: Fail", "timeoutSeconds: 3", "- " + namespace} {
			if !strings.Contains(string(hook), want) {
				t.Errorf("webhook lacks %q:\n%s", want, hook)
			}
		}
	})
	t.Run("admission off renders no webhook and no certificate rights", func(t *testing.T) {
		objs := kinds(helmTemplate(t, "admission.enabled=false"))
		if n := len(objs["ValidatingWebhookConfiguration"]); n != 0 {
			t.Errorf("%d webhook configurations", n)
		}
		if len(objs["Service"]) != 1 {
			t.Errorf("want the metrics Service alone, got %d", len(objs["Service"]))
		}
		for _, kind := range []string{"Role", "ClusterRole"} {
			for _, o := range objs[kind] {
				if strings.HasSuffix(o.GetName(), "webhook-cert") {
					t.Errorf("%s %s rendered with admission off", kind, o.GetName())
				}
			}
		}
		if a := argsOf(objs); strings.Contains(a, "--webhook-cert") {
			t.Errorf("args %s", a)
		}
	})
	t.Run("cert-manager with the user's issuer", func(t *testing.T) {
		objs := kinds(helmTemplate(t, "admission.certManager.enabled=true", "admission.certManager.issuerRef.kind=ClusterIssuer", "admission.certManager.issuerRef.name=corp-ca"))
		if n := len(objs["Issuer"]); n != 0 {
			t.Errorf("a self-signed Issuer beside the user's: %d", n)
		}
		ref, _ := sigsyaml.Marshal(objs["Certificate"][0].Object["spec"].(map[string]any)["issuerRef"])
		if !strings.Contains(string(ref), "kind: ClusterIssuer") || !strings.Contains(string(ref), "name: corp-ca") {
			t.Errorf("issuerRef %s", ref)
		}
	})
	// An opt-in ClusterRole is rendered, and bound in the namespaces its
	// value lists only.
	optIn := []struct{ role, set string }{
		{"placeholders", "capacity.placeholderNamespaces={team-a,team-b}"},
		{"rebalance", "rebalance.namespaces={team-a,team-b}"},
		{"evict", "evictions.namespaces={team-a,team-b}"},
	}
	for _, o := range optIn {
		t.Run(o.role+" namespaces get the opt-in role bound", func(t *testing.T) {
			objs := kinds(helmTemplate(t, o.set))
			role := "placement-guard-" + o.role
			var bound []string
			for _, rb := range objs["RoleBinding"] {
				if rb.GetName() != role {
					continue
				}
				bound = append(bound, rb.GetNamespace())
				ref, _ := sigsyaml.Marshal(rb.Object["roleRef"])
				if !strings.Contains(string(ref), "name: "+role) {
					t.Errorf("roleRef %s", ref)
				}
			}
			if !reflect.DeepEqual(bound, []string{"team-a", "team-b"}) {
				t.Errorf("%s bound in %v", role, bound)
			}
			if !slices.ContainsFunc(objs["ClusterRole"], func(cr *unstructured.Unstructured) bool { return cr.GetName() == role }) {
				t.Errorf("no ClusterRole %s", role)
			}
		})
	}
	t.Run("the disruption budget can be left out", func(t *testing.T) {
		if n := len(kinds(helmTemplate(t, "podDisruptionBudget.enabled=false"))["PodDisruptionBudget"]); n != 0 {
			t.Errorf("%d PodDisruptionBudgets", n)
		}
	})
}

// An install that cannot lock a cluster: the names follow the install
// namespace, the judging budget follows the timeout, infrastructure is
// never sent to the check under Fail, the check's port is reachable from
// the API server alone when asked, and a budget one replica cannot
// satisfy is refused.
func TestChartCannotLockTheCluster(t *testing.T) {
	excluded := func(t *testing.T, objs map[string][]*unstructured.Unstructured) []string {
		t.Helper()
		var out []string
		for _, kind := range []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} {
			for _, cfg := range objs[kind] {
				hooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
				for _, h := range hooks {
					exprs, _, _ := unstructured.NestedSlice(h.(map[string]any), "namespaceSelector", "matchExpressions")
					if len(exprs) != 2 {
						t.Fatalf("%s: want the names and the Off label in the namespace selector, got %v", kind, exprs)
					}
					label := exprs[1].(map[string]any)
					if label["key"] != "placementguard.io/admission" || label["operator"] != "NotIn" || fmt.Sprint(label["values"]) != "[Off]" {
						t.Errorf("%s: namespaces labelled Off are sent: %v", kind, label)
					}
					names, _, _ := unstructured.NestedStringSlice(exprs[0].(map[string]any), "values")
					out = append(out, strings.Join(names, ","))
				}
			}
		}
		return out
	}

	t.Run("the judging budget is two fifths of timeoutSeconds", func(t *testing.T) {
		for timeout, budget := range map[string]string{"1": "400ms", "5": "2000ms", "30": "12000ms"} {
			if a := argsOf(kinds(helmTemplate(t, "admission.timeoutSeconds="+timeout))); !strings.Contains(a, "--admission-budget="+budget) {
				t.Errorf("timeoutSeconds %s: args %s, want --admission-budget=%s", timeout, a, budget)
			}
		}
	})
	t.Run("with failurePolicy Fail cert-manager's namespace is never sent", func(t *testing.T) {
		for _, names := range excluded(t, kinds(helmTemplate(t))) {
			if names != "kube-system,"+namespace {
				t.Errorf("Ignore: %s", names)
			}
		}
		for _, names := range excluded(t, kinds(helmTemplate(t, "admission.failurePolicy=Fail", "admission.excludeNamespaces={vault,cert-manager}"))) {
			if names != "kube-system,"+namespace+",vault,cert-manager" {
				t.Errorf("Fail: %s", names)
			}
		}
		for _, names := range excluded(t, kinds(helmTemplate(t, "admission.failurePolicy=Fail", "admission.certManager.namespace=pki"))) {
			if names != "kube-system,"+namespace+",pki" {
				t.Errorf("Fail, cert-manager in pki: %s", names)
			}
		}
	})
	t.Run("the certificate's host names the install namespace", func(t *testing.T) {
		objs := kinds(helmTemplate(t))
		if a := argsOf(objs); !strings.Contains(a, "--webhook-cert-hosts=placement-guard-webhook-service.$(POD_NAMESPACE).svc") {
			t.Errorf("args %s", a)
		}
		env, _ := sigsyaml.Marshal(objs["Deployment"][0].Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["env"])
		if !strings.Contains(string(env), "name: POD_NAMESPACE") || !strings.Contains(string(env), "fieldPath: metadata.namespace") {
			t.Errorf("env %s", env)
		}
	})
	t.Run("the NetworkPolicy admits the check's port from the API server's addresses only", func(t *testing.T) {
		if n := len(kinds(helmTemplate(t))["NetworkPolicy"]); n != 0 {
			t.Fatalf("the defaults render %d NetworkPolicy", n)
		}
		objs := kinds(helmTemplate(t, "admission.networkPolicy.enabled=true", "admission.networkPolicy.apiServerCIDRs={10.0.0.0/24,fd00::/64}"))
		if len(objs["NetworkPolicy"]) != 1 {
			t.Fatalf("want one NetworkPolicy, got %d", len(objs["NetworkPolicy"]))
		}
		spec, _ := sigsyaml.Marshal(objs["NetworkPolicy"][0].Object["spec"])
		want := `ingress:
- from:
  - ipBlock:
      cidr: 10.0.0.0/24
  - ipBlock:
      cidr: fd00::/64
  ports:
  - port: 9443
    protocol: TCP
- ports:
  - port: 8443
    protocol: TCP
podSelector:
  matchLabels:
    app.kubernetes.io/name: placement-guard
    control-plane: controller-manager
policyTypes:
- Ingress
`
		if string(spec) != want {
			t.Errorf("spec:\n%s\nwant:\n%s", spec, want)
		}
	})
	t.Run("values that would lock the cluster are refused", func(t *testing.T) {
		for _, set := range [][]string{{"admission.networkPolicy.enabled=true"}, {"admission.networkPolicy.enabled=true", "admission.networkPolicy.apiServerCIDRs={ten}"},
			{"admission.excludeNamespaces={Bad_NS}"}} {
			args := []string{"template", "x", filepath.Join(root, "dist", "chart")}
			for _, s := range set {
				args = append(args, "--set", s)
			}
			if _, err := run(t, "helm", args...); err == nil || !strings.Contains(err.Error(), "schema") {
				t.Errorf("--set %v must be refused by values.schema.json, got %v", set, err)
			}
		}
		_, err := run(t, "helm", "template", "x", filepath.Join(root, "dist", "chart"), "--set", "replicas=1")
		if err == nil || !strings.Contains(err.Error(), "block every node drain") {
			t.Errorf("replicas=1 with the disruption budget must be refused, got %v", err)
		}
		if _, err := run(t, "helm", "template", "x", filepath.Join(root, "dist", "chart"), "--set", "replicas=1", "--set", "podDisruptionBudget.enabled=false"); err != nil {
			t.Errorf("replicas=1 without the disruption budget: %v", err)
		}
	})
}

// config/default installed under another namespace by a kustomization of
// one's own: nothing that matters keeps naming placement-guard-system.
func TestConfigDefaultFollowsItsNamespace(t *testing.T) {
	dir := t.TempDir()
	abs, err := filepath.Abs(filepath.Join(root, "config", "default"))
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(dir, abs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte("namespace: platform-ops\nresources:\n  - "+rel+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "kustomize", "build", "--load-restrictor", "LoadRestrictionsNone", dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range decode(t, out) {
		switch o.GetKind() {
		case "Namespace":
			if o.GetName() != "platform-ops" || o.GetLabels()["placementguard.io/admission"] != "Off" {
				t.Errorf("namespace %s labels %v: the check must leave it out by its label", o.GetName(), o.GetLabels())
			}
		case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
			sel, _ := sigsyaml.Marshal(o.Object["webhooks"])
			if !strings.Contains(string(sel), "key: placementguard.io/admission\n      operator: NotIn\n      values:\n      - \"Off\"") {
				t.Errorf("%s does not leave out namespaces labelled Off:\n%s", o.GetKind(), sel)
			}
			svc, _ := sigsyaml.Marshal(o.Object["webhooks"].([]any)[0].(map[string]any)["clientConfig"])
			if !strings.Contains(string(svc), "namespace: platform-ops") {
				t.Errorf("%s calls %s", o.GetKind(), svc)
			}
		case "Deployment":
			args, _ := sigsyaml.Marshal(o.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["args"])
			if strings.Contains(string(args), "placement-guard-system") || !strings.Contains(string(args), ".$(POD_NAMESPACE).svc") {
				t.Errorf("the manager's args name a namespace:\n%s", args)
			}
		}
	}
}

// scheduler.config puts the cluster's KubeSchedulerConfiguration into a
// ConfigMap the manager mounts and reads (--scheduler-config, with
// scheduler.name's profile); scheduler.existingConfigMap mounts one of the
// user's instead, and renders none.
func TestChartSchedulerConfigReachesTheManager(t *testing.T) {
	const cfg = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: packer\n"
	for _, tc := range []struct {
		name      string
		set       []string
		configMap string
		rendered  bool
	}{
		{"inline", []string{"scheduler.config=" + cfg, "scheduler.name=packer"}, "placement-guard-scheduler-config", true},
		{"existing", []string{"scheduler.existingConfigMap=cluster-scheduler", "scheduler.name=packer"}, "cluster-scheduler", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := helmTemplate(t, tc.set...)
			var rendered *unstructured.Unstructured
			var manager *unstructured.Unstructured
			for _, o := range objs {
				switch {
				case o.GetKind() == "ConfigMap" && strings.HasSuffix(o.GetName(), "-scheduler-config"):
					rendered = o
				case o.GetKind() == "Deployment":
					manager = o
				}
			}
			if (rendered != nil) != tc.rendered {
				t.Fatalf("a ConfigMap rendered: %v, want %v", rendered != nil, tc.rendered)
			}
			if rendered != nil {
				if data, _, _ := unstructured.NestedString(rendered.Object, "data", "config.yaml"); data != cfg {
					t.Errorf("the ConfigMap holds %q, want the configuration as given", data)
				}
			}
			spec, _ := sigsyaml.Marshal(manager.Object["spec"])
			for _, want := range []string{"--scheduler-config=/etc/placement-guard/scheduler/config.yaml", "--scheduler-name=packer",
				"mountPath: /etc/placement-guard/scheduler", "name: " + tc.configMap} {
				if !strings.Contains(string(spec), want) {
					t.Errorf("the manager's spec lacks %q:\n%s", want, spec)
				}
			}
		})
	}
	for _, o := range helmTemplate(t) {
		spec, _ := sigsyaml.Marshal(o.Object)
		if o.GetKind() == "Deployment" && strings.Contains(string(spec), "--scheduler-config") {
			t.Error("without scheduler values the manager is given --scheduler-config")
		}
	}
}
