package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/placement-guard/placement-guard/internal/webhook"

	"github.com/placement-guard/placement-guard/test/localcluster"
	"github.com/placement-guard/placement-guard/test/utils"
)

// warnings collects the API server's warnings, which is how PodSecurity
// admission reports a workload its namespace's level would reject.
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

// Serial: an installation is cluster-wide, in placement-guard-system, under
// the names the suite's operator keeps.
var _ = Describe("Installing with kubectl apply -k config/default", Label("install"), Serial, func() {
	It("renders with kustomize, applies, and runs the manager under the restricted Pod Security Standard", func(ctx SpecContext) {
		env := newEnv(ctx, "install")
		_, err := env.AddNode(ctx, "node-0", nil)
		Expect(err).NotTo(HaveOccurred())
		waitNamespaceGone(ctx, "placement-guard-system")
		bin, err := localcluster.FindBinaries()
		Expect(err).NotTo(HaveOccurred())
		var rendered, stderr bytes.Buffer
		build := exec.CommandContext(ctx, filepath.Join(bin, "kustomize"), "build", filepath.Join("..", "..", "config", "default"))
		build.Stdout, build.Stderr = &rendered, &stderr
		Expect(build.Run()).To(Succeed(), stderr.String())

		objs, warned := serverSideApply(ctx, shippedWebhookIsTheSuites(ctx, rendered.Bytes()))
		kinds := map[string]int{}
		for _, obj := range objs {
			kinds[obj.GetKind()]++
		}
		DeferCleanup(func(ctx SpecContext) {
			for _, obj := range objs {
				if obj.GetKind() == "CustomResourceDefinition" {
					continue // the suite's operator serves it
				}
				Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, obj))).To(Succeed())
			}
			waitNamespaceGone(ctx, "placement-guard-system")
		})
		Expect(kinds).To(HaveKeyWithValue("Deployment", 1))
		Expect(kinds).To(HaveKeyWithValue("CustomResourceDefinition", 1))
		Expect(kinds).To(HaveKey("ClusterRole"))
		Expect(kinds).To(HaveKeyWithValue("PodDisruptionBudget", 1))
		Expect(kinds).NotTo(HaveKey("Secret"))
		Expect(warned).To(BeEmpty(), "the API server warned while applying config/default")

		By("the editor and viewer roles are aggregated into the built-in admin, edit and view roles")
		grants := func(g Gomega, role, verb string) bool {
			cr := &rbacv1.ClusterRole{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: role}, cr)).To(Succeed())
			for _, r := range cr.Rules {
				if slices.Contains(r.APIGroups, "placementguard.io") && slices.Contains(r.Resources, "placementmigrations") && slices.Contains(r.Verbs, verb) {
					return true
				}
			}
			return false
		}
		Eventually(func(g Gomega) {
			g.Expect(grants(g, "admin", "create")).To(BeTrue(), "admin may create migrations")
			g.Expect(grants(g, "edit", "create")).To(BeTrue(), "edit may create migrations")
			g.Expect(grants(g, "view", "list")).To(BeTrue(), "view may list migrations")
		}).Should(Succeed())
		Expect(grants(Default, "view", "create")).To(BeFalse(), "view may not create migrations")

		By("the manager's pod is admitted by PodSecurity enforce=restricted and runs")
		Eventually(func(g Gomega) {
			pods, err := utils.PodsOf(ctx, k8sClient, "placement-guard-system", map[string]string{"control-plane": "controller-manager"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods).To(HaveLen(2), "two replicas, both serving the admission check")
			g.Expect(utils.Running(pods[0])).To(BeTrue(), utils.Placement(pods))
			g.Expect(utils.Running(pods[1])).To(BeTrue(), utils.Placement(pods))
			spec := pods[0].Spec
			g.Expect(*spec.SecurityContext.RunAsNonRoot).To(BeTrue())
			g.Expect(spec.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
			sc := spec.Containers[0].SecurityContext
			g.Expect(*sc.ReadOnlyRootFilesystem).To(BeTrue())
			g.Expect(*sc.AllowPrivilegeEscalation).To(BeFalse())
			g.Expect(sc.Capabilities.Drop).To(ContainElement(corev1.Capability("ALL")))
			g.Expect(spec.Containers[0].Resources.Requests).NotTo(BeEmpty())
			g.Expect(spec.Containers[0].Resources.Limits).NotTo(BeEmpty())
			g.Expect(spec.Containers[0].LivenessProbe).NotTo(BeNil())
			g.Expect(spec.Containers[0].ReadinessProbe).NotTo(BeNil())
			g.Expect(spec.Containers[0].Args).To(ContainElement("--leader-elect"))
		}).Should(Succeed())
		ns := &corev1.Namespace{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "placement-guard-system"}, ns)).To(Succeed())
		Expect(ns.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "restricted"))
	})
})

// shippedWebhookIsTheSuites checks that the webhook configurations a
// rendering installs (the check's and Adopt mode's) are the ones the suite
// runs with (registered by URL, under the same names, so not applied again
// here): the same requests sent, the same failure policy, timeout and
// selectors, a Service that reaches the manager's webhook port at the
// path the manager serves. It returns the rendering without them.
func shippedWebhookIsTheSuites(ctx SpecContext, rendered []byte) []byte {
	var keep [][]byte
	shipped := map[string]*unstructured.Unstructured{}
	service, port := map[string]int64{}, int64(0)
	for _, obj := range decodeManifests(rendered) {
		switch obj.GetKind() {
		case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
			shipped[obj.GetKind()] = obj
			continue
		case "Service":
			ports, _, _ := unstructured.NestedSlice(obj.Object, "spec", "ports")
			target, _, _ := unstructured.NestedInt64(ports[0].(map[string]any), "targetPort")
			service[obj.GetNamespace()+"/"+obj.GetName()] = target
		case "Deployment":
			containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
			ports, _, _ := unstructured.NestedSlice(containers[0].(map[string]any), "ports")
			for _, p := range ports {
				if p.(map[string]any)["name"] == "webhook-server" {
					port, _, _ = unstructured.NestedInt64(p.(map[string]any), "containerPort")
				}
			}
		}
		data, err := sigsyaml.Marshal(obj.Object)
		Expect(err).NotTo(HaveOccurred())
		keep = append(keep, data)
	}
	for kind, want := range map[string]struct{ name, path string }{
		"ValidatingWebhookConfiguration": {webhookConfiguration, webhook.Path},
		"MutatingWebhookConfiguration":   {mutatingConfiguration, webhook.AdoptPath},
	} {
		obj := shipped[kind]
		Expect(obj).NotTo(BeNil(), "the rendering installs no %s", kind)
		Expect(obj.GetName()).To(Equal(want.name))
		// Defaulted by the API server as the suite's is: a dry run under another name.
		defaulted := obj.DeepCopy()
		defaulted.SetName("dry-run-" + obj.GetName())
		Expect(k8sClient.Create(ctx, defaulted, client.DryRunAll)).To(Succeed())
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(obj.GroupVersionKind())
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: want.name}, live)).To(Succeed())
		shippedHooks, _, _ := unstructured.NestedSlice(defaulted.Object, "webhooks")
		liveHooks, _, _ := unstructured.NestedSlice(live.Object, "webhooks")
		Expect(shippedHooks).To(HaveLen(len(liveHooks)))
		for i := range shippedHooks {
			w, got := shippedHooks[i].(map[string]any), liveHooks[i].(map[string]any)
			svc, _, _ := unstructured.NestedMap(w, "clientConfig", "service")
			Expect(svc).NotTo(BeNil())
			Expect(service).To(HaveKeyWithValue(fmt.Sprint(svc["namespace"])+"/"+fmt.Sprint(svc["name"]), port), "the configuration's Service does not reach the manager's webhook port")
			Expect(svc["path"]).To(Equal(want.path))
			delete(w, "clientConfig")
			delete(got, "clientConfig")
			Expect(got).To(Equal(w), "the suite runs another %s than config/default installs", kind)
		}
	}
	return bytes.Join(keep, []byte("\n---\n"))
}

// decodeManifests splits a multi-document YAML into objects.
func decodeManifests(data []byte) []*unstructured.Unstructured {
	var objs []*unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		err := dec.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return objs
		}
		Expect(err).NotTo(HaveOccurred())
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}
