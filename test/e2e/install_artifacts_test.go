package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/test/localcluster"
	"github.com/placement-guard/placement-guard/test/utils"
)

// Serial, as the kustomize installation.
var _ = Describe("Installing from the release artifacts", Label("install"), Ordered, Serial, func() {
	It("applies dist/install.yaml with server-side apply and runs the manager it pins", func(ctx SpecContext) {
		env := newEnv(ctx, "installer")
		_, err := env.AddNode(ctx, "node-0", nil)
		Expect(err).NotTo(HaveOccurred())
		waitNamespaceGone(ctx, "placement-guard-system")

		dist := GinkgoT().TempDir()
		image := "registry.example.com/placement-guard:v0.1.0"
		out, err := exec.CommandContext(ctx, "make", "-C", filepath.Join("..", ".."), "--no-print-directory",
			"build-installer", "DIST="+dist, "IMG="+image).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		rendered, err := os.ReadFile(filepath.Join(dist, "install.yaml"))
		Expect(err).NotTo(HaveOccurred())

		objs, warned := serverSideApply(ctx, shippedWebhookIsTheSuites(ctx, rendered))
		DeferCleanup(func(ctx SpecContext) {
			for _, obj := range objs {
				if obj.GetKind() != "CustomResourceDefinition" { // the suite's operator serves it
					Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, obj))).To(Succeed())
				}
			}
			waitNamespaceGone(ctx, "placement-guard-system")
		})
		Expect(warned).To(BeEmpty(), "the API server warned while applying dist/install.yaml")

		By("the manager runs the image install.yaml names, admitted under enforce=restricted")
		Eventually(func(g Gomega) {
			pods, err := utils.PodsOf(ctx, k8sClient, "placement-guard-system", map[string]string{"control-plane": "controller-manager"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods).To(HaveLen(2))
			for _, p := range pods {
				g.Expect(utils.Running(p)).To(BeTrue(), utils.Placement(pods))
				g.Expect(p.Spec.Containers[0].Image).To(Equal(image))
			}
		}).Should(Succeed())
	})

	It("installs, upgrades and uninstalls the Helm chart with the built helm, leaving nothing behind", func(ctx SpecContext) {
		env := newEnv(ctx, "helm")
		_, err := env.AddNode(ctx, "node-0", nil)
		Expect(err).NotTo(HaveOccurred())

		// The release's namespace enforces the restricted Pod Security Standard.
		ns := env.Namespace + "-operator"
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
			"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted"}}})).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		})
		helm := helmIn(GinkgoT().TempDir())
		release := "pg"
		// The suite's operator already serves the CRD: mark it as the
		// release's, as Helm requires before it adopts an object, so that the
		// chart installs and upgrades it as it would on a new cluster. The
		// chart's other names are kept apart from config/default's by
		// nameOverride.
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "placementmigrations.placementguard.io"}, crd)).To(Succeed())
		adopt := client.MergeFrom(crd.DeepCopy())
		crd.Labels = map[string]string{"app.kubernetes.io/managed-by": "Helm"}
		crd.Annotations = map[string]string{"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": ns}
		Expect(k8sClient.Patch(ctx, crd, adopt)).To(Succeed())
		common := []string{"--namespace", ns, "--set", "nameOverride=" + ns, "--set", "image.tag=latest", "--wait", "--timeout", "2m"}

		managerPods := func(g Gomega) []corev1.Pod {
			pods, err := utils.PodsOf(ctx, k8sClient, ns, map[string]string{"control-plane": "controller-manager"})
			g.Expect(err).NotTo(HaveOccurred())
			return pods
		}
		readyPods := func(n int) {
			Eventually(func(g Gomega) {
				pods := managerPods(g)
				g.Expect(pods).To(HaveLen(n), utils.Placement(pods))
				for _, p := range pods {
					g.Expect(utils.Running(p)).To(BeTrue(), utils.Placement(pods))
				}
			}).Should(Succeed())
		}

		By("helm install")
		helm.run(ctx, append([]string{"install", release, filepath.Join("..", "..", "dist", "chart")}, common...)...)
		readyPods(2)
		Expect(clusterObjectsOf(ctx, release)).To(ContainElement("ValidatingWebhookConfiguration/"+ns+"-validating-webhook-configuration"),
			"the release installs its ClusterRoles, bindings and admission webhook")

		By("helm upgrade to three replicas with the policies on and the admission check in Deny mode")
		helm.run(ctx, append([]string{"upgrade", release, filepath.Join("..", "..", "dist", "chart"), "--set", "replicas=3", "--set", "policies.enable=true",
			"--set", "admission.mode=Deny"}, common...)...)
		readyPods(3)

		By("helm uninstall")
		helm.run(ctx, "uninstall", release, "--namespace", ns, "--wait", "--timeout", "2m")
		By("the CRD, and with it every migration, outlives the release (crd.keep)")
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "placementmigrations.placementguard.io"}, crd)).To(Succeed())
		Expect(crd.DeletionTimestamp).To(BeNil())
		Eventually(func(g Gomega) {
			g.Expect(managerPods(g)).To(BeEmpty())
			g.Expect(clusterObjectsOf(ctx, release)).To(BeEmpty(), "cluster-scoped objects stranded by the uninstall")
			for _, list := range []client.ObjectList{&corev1.ServiceAccountList{}, &rbacv1.RoleList{}, &rbacv1.RoleBindingList{}, &corev1.ServiceList{}} {
				g.Expect(k8sClient.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": release})).To(Succeed())
				items, err := apimeta.ExtractList(list)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(items).To(BeEmpty(), "namespaced objects stranded by the uninstall")
			}
		}).Should(Succeed())
	})
})

// helmRunner runs bin/helm against the suite's cluster with its own home, so
// that no user's Helm configuration or cache is read or written.
type helmRunner struct{ home string }

func helmIn(home string) helmRunner { return helmRunner{home: home} }

func (h helmRunner) run(ctx SpecContext, args ...string) {
	bin, err := localcluster.FindBinaries()
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "helm"), append(args, "--kubeconfig", cluster.Kubeconfig)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+h.home+"/cache", "HELM_CONFIG_HOME="+h.home+"/config", "HELM_DATA_HOME="+h.home+"/data")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	Expect(cmd.Run()).To(Succeed(), "helm %s\n%s\n%s", strings.Join(args, " "), stdout.String(), stderr.String())
	Expect(strings.ToLower(stderr.String())).NotTo(ContainSubstring("warn"), "helm %s warned: %s", args[0], stderr.String())
}

// clusterObjectsOf lists the cluster-scoped objects a Helm release labelled.
func clusterObjectsOf(ctx SpecContext, release string) []string {
	var names []string
	roles := &rbacv1.ClusterRoleList{}
	Expect(k8sClient.List(ctx, roles, client.MatchingLabels{"app.kubernetes.io/instance": release})).To(Succeed())
	for _, r := range roles.Items {
		names = append(names, "ClusterRole/"+r.Name)
	}
	bindings := &rbacv1.ClusterRoleBindingList{}
	Expect(k8sClient.List(ctx, bindings, client.MatchingLabels{"app.kubernetes.io/instance": release})).To(Succeed())
	for _, b := range bindings.Items {
		names = append(names, "ClusterRoleBinding/"+b.Name)
	}
	webhooks := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	Expect(k8sClient.List(ctx, webhooks, client.MatchingLabels{"app.kubernetes.io/instance": release})).To(Succeed())
	for _, w := range webhooks.Items {
		names = append(names, "ValidatingWebhookConfiguration/"+w.Name)
	}
	return names
}

func waitNamespaceGone(ctx SpecContext, name string) {
	Eventually(func() bool {
		err := k8sClient.Get(ctx, client.ObjectKey{Name: name}, &corev1.Namespace{})
		return apierrors.IsNotFound(err)
	}).Should(BeTrue(), "namespace %s is still there", name)
}

// serverSideApply applies every object of a multi-document YAML as kubectl
// apply --server-side does, and returns them with the API server's warnings.
func serverSideApply(ctx SpecContext, rendered []byte) ([]*unstructured.Unstructured, []string) {
	cfg := rest.CopyConfig(cluster.Config)
	w := &warnings{}
	cfg.WarningHandler = w
	c, err := client.New(cfg, client.Options{})
	Expect(err).NotTo(HaveOccurred())
	objs := decodeManifests(rendered)
	for _, obj := range objs {
		Expect(c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("kubectl"), client.ForceOwnership)).To(Succeed(), obj.GetKind()+"/"+obj.GetName())
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return objs, append([]string(nil), w.seen...)
}
