package e2e

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/adoption"
	"github.com/placement-guard/placement-guard/test/localcluster"
	"github.com/placement-guard/placement-guard/test/utils"
)

// manifestOf is a workload as its author's manifest has it: the object
// without what the API server keeps of its own.
func manifestOf(d *appsv1.Deployment) *appsv1.Deployment {
	m := d.DeepCopy()
	m.APIVersion, m.Kind = "apps/v1", "Deployment"
	m.ManagedFields, m.ResourceVersion, m.UID, m.Generation = nil, "", "", 0
	m.CreationTimestamp = metav1.Time{}
	m.Annotations = nil
	m.Status = appsv1.DeploymentStatus{}
	return m
}

// kubectlDiff runs `kubectl diff --server-side` on a manifest, as a person
// or a pipeline checks for drift: true when the cluster differs.
func kubectlDiff(ctx SpecContext, namespace string, obj client.Object) (bool, string) {
	bin, err := localcluster.FindBinaries()
	Expect(err).NotTo(HaveOccurred())
	data, err := yaml.Marshal(obj)
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), "--kubeconfig", cluster.Kubeconfig, "-n", namespace,
		"diff", "--server-side", "--force-conflicts", "--field-manager", "kubectl", "-f", "-")
	cmd.Stdin = bytes.NewReader(data)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if err == nil {
		return false, out.String()
	}
	exit, ok := err.(*exec.ExitError)
	Expect(ok && exit.ExitCode() == 1).To(BeTrue(), "kubectl diff: %v: %s", err, out.String())
	return true, out.String()
}

// noDrift checks that the manifest, diffed and dry-run applied as kubectl,
// Flux's kustomize-controller and Argo CD's server-side diff do it, gives
// the workload exactly as it is: none of them would see drift, nor sync.
func noDrift(ctx SpecContext, namespace string, manifest *appsv1.Deployment) {
	live := getDeployment(ctx, namespace, manifest.Name)
	differs, out := kubectlDiff(ctx, namespace, manifest.DeepCopy())
	Expect(differs).To(BeFalse(), "kubectl diff --server-side sees drift:\n%s", out)
	for _, manager := range []string{"kustomize-controller", "argocd-controller"} {
		dry := manifest.DeepCopy()
		Expect(k8sClient.Patch(ctx, dry, client.Apply, client.FieldOwner(manager), client.ForceOwnership, client.DryRunAll)).To(Succeed()) //nolint:staticcheck // the apply patch is what both tools send
		Expect(equality.Semantic.DeepEqual(dry.Spec, live.Spec)).To(BeTrue(), "%s's server-side dry run predicts %+v, the live workload has %+v",
			manager, dry.Spec.Template.Spec.Affinity, live.Spec.Template.Spec.Affinity)
		Expect(dry.Annotations).To(Equal(live.Annotations), "%s's server-side dry run predicts other annotations", manager)
	}
}

// adoptedMigration is the migration Adopt mode made for a workload.
func adoptedMigration(ctx SpecContext, namespace, workload string) func(Gomega) *pgv1.PlacementMigration {
	return func(g Gomega) *pgv1.PlacementMigration {
		var list pgv1.PlacementMigrationList
		g.Expect(k8sClient.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{adoption.AdoptedLabel: workload})).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1))
		return &list.Items[0]
	}
}

// soakNow lets an adopted migration harden without its 5-minute soak, as
// a person steering it may.
func soakNow(ctx SpecContext, pm *pgv1.PlacementMigration) {
	patch := client.MergeFrom(pm.DeepCopy())
	pm.Spec.SoakDuration = &metav1.Duration{}
	Expect(k8sClient.Patch(ctx, pm, patch)).To(Succeed())
}

var _ = Describe("Adopt mode: a hard constraint merged straight into a workload, hardened once it is safe", Label("operator", "admission"), func() {
	It("admits seed 000's change soft, hardens it when the second data node joins, and no diff of the manifest ever sees drift", func(ctx SpecContext) {
		env := newEnv(ctx, "adopt-000")
		labelNamespace(ctx, env.Namespace, "Adopt")
		seed000(ctx, env)
		manifest := manifestOf(getDeployment(ctx, env.Namespace, "graphdb"))
		manifest.Spec.Template.Spec.Affinity = utils.HostnameAntiAffinity(map[string]string{"app": "search"})

		out, errOut, code := kubectlApply(ctx, env.Namespace, nil, manifest.DeepCopy())
		Expect(code).To(Equal(0), out+errOut)
		Expect(errOut).To(And(ContainSubstring("required anti-affinity on kubernetes.io/hostname admitted as preferred (Adopt)"),
			ContainSubstring("PlacementMigration graphdb-adopted-"), ContainSubstring("InsufficientCapacity")))
		paa := getDeployment(ctx, env.Namespace, "graphdb").Spec.Template.Spec.Affinity.PodAntiAffinity
		Expect(paa.RequiredDuringSchedulingIgnoredDuringExecution).To(BeEmpty(), "the term is not admitted hard")
		Expect(paa.PreferredDuringSchedulingIgnoredDuringExecution).To(HaveLen(1))

		By("the operator makes the migration, owned by the Deployment, and it waits for a second data node")
		var pm *pgv1.PlacementMigration
		Eventually(func(g Gomega) {
			pm = adoptedMigration(ctx, env.Namespace, "graphdb")(g)
			owner := metav1.GetControllerOf(pm)
			g.Expect(owner).NotTo(BeNil())
			g.Expect(owner.Kind).To(Equal("Deployment"))
			g.Expect(owner.Name).To(Equal("graphdb"))
		}).Should(Succeed())
		soakNow(ctx, pm)
		Eventually(phaseOf(ctx, env.Namespace, pm.Name)).Should(Equal(pgv1.PhaseWaitingForCapacity), explain(ctx, env.Namespace, pm.Name))
		noDrift(ctx, env.Namespace, manifest)

		By("the same manifest applied again changes nothing")
		generation := getDeployment(ctx, env.Namespace, "graphdb").Generation
		_, errOut, code = kubectlApply(ctx, env.Namespace, nil, manifest.DeepCopy())
		Expect(code).To(Equal(0), errOut)
		Expect(getDeployment(ctx, env.Namespace, "graphdb").Generation).To(Equal(generation), "a re-apply wrote a new template")

		By("a second data node joins: the migration hardens the term where the manifest has it")
		_, err := env.AddNode(ctx, "data-2", map[string]string{"role": "data"})
		Expect(err).NotTo(HaveOccurred())
		Eventually(phaseOf(ctx, env.Namespace, pm.Name)).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, pm.Name))
		live := getDeployment(ctx, env.Namespace, "graphdb")
		Expect(live.Spec.Template.Spec.Affinity).To(Equal(manifest.Spec.Template.Spec.Affinity), "the workload ends as its manifest says")
		pods := allRunning(ctx, env.Namespace, map[string]string{"app": "graphdb"}, 1)
		Expect(pods[0].Spec.NodeName).To(Equal(env.NodeName("data-2")))
		noDrift(ctx, env.Namespace, manifest)

		By("deleting the Deployment deletes its migration")
		Expect(k8sClient.Delete(ctx, live)).To(Succeed())
		Eventually(func() bool {
			err := k8sClient.Get(ctx, client.ObjectKeyFromObject(pm), &pgv1.PlacementMigration{})
			return apierrors.IsNotFound(err)
		}).Should(BeTrue(), "the garbage collector deletes the migration the Deployment owns")
	})

	It("keeps seed 001's shape soft, with the deadlock named in the adopted migration's status", func(ctx SpecContext) {
		env := newEnv(ctx, "adopt-001")
		labelNamespace(ctx, env.Namespace, "Adopt")
		seed001(ctx, env)
		manifest := manifestOf(getDeployment(ctx, env.Namespace, "web"))
		manifest.Spec.Template.Spec.Affinity = utils.HostnameAntiAffinity(map[string]string{"app": "web"})
		_, errOut, code := kubectlApply(ctx, env.Namespace, nil, manifest.DeepCopy())
		Expect(code).To(Equal(0), errOut)
		Expect(errOut).To(And(ContainSubstring("admitted as preferred (Adopt)"), ContainSubstring("RolloutDeadlock")))

		var pm *pgv1.PlacementMigration
		Eventually(func(g Gomega) { pm = adoptedMigration(ctx, env.Namespace, "web")(g) }).Should(Succeed())
		soakNow(ctx, pm)
		Eventually(func(g Gomega) {
			got := getMigration(ctx, env.Namespace, pm.Name)
			g.Expect(got.Status.Phase).To(Equal(pgv1.PhaseBlocked))
			var named []string
			for _, h := range got.Status.Hazards {
				named = append(named, h.Type)
			}
			g.Expect(named).To(ContainElement(pgv1.HazardRolloutDeadlock))
		}).Should(Succeed(), explain(ctx, env.Namespace, pm.Name))
		paa := getDeployment(ctx, env.Namespace, "web").Spec.Template.Spec.Affinity.PodAntiAffinity
		Expect(paa.RequiredDuringSchedulingIgnoredDuringExecution).To(BeEmpty(), "it stays soft")
		Expect(strings.Join(eventNotes(ctx, env.Namespace, "web", "Adopted"), "\n")).To(ContainSubstring(pm.Name), "an Event on the Deployment names the migration")
		allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 2)
	})
})

// eventNotes are the notes of the Events of a reason on a Deployment.
func eventNotes(ctx SpecContext, namespace, name, reason string) []string {
	var notes []string
	Eventually(func(g Gomega) {
		notes = nil
		var list corev1.EventList
		g.Expect(k8sClient.List(ctx, &list, client.InNamespace(namespace))).To(Succeed())
		for _, e := range list.Items {
			if e.InvolvedObject.Kind == "Deployment" && e.InvolvedObject.Name == name && e.Reason == reason {
				notes = append(notes, e.Message)
			}
		}
		g.Expect(notes).NotTo(BeEmpty())
	}).Should(Succeed())
	return notes
}
