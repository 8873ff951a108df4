package e2e

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/adoption"
	"github.com/placement-guard/placement-guard/internal/placement"
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
func noDrift(ctx SpecContext, namespace string, manifest client.Object) {
	// kubectl diff shows status too, and a rollout moves status and the
	// revision annotation between two reads: a difference that lasts is
	// drift, one that settles is not.
	Eventually(func(g Gomega) {
		differs, out := kubectlDiff(ctx, namespace, manifest.DeepCopyObject().(client.Object))
		g.Expect(differs).To(BeFalse(), "kubectl diff --server-side sees drift:\n%s", out)
	}).WithTimeout(time.Minute).Should(Succeed())
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(manifest)
	Expect(err).NotTo(HaveOccurred())
	for _, manager := range []string{"kustomize-controller", "argocd-controller"} {
		Eventually(func(g Gomega) {
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind(manifest.GetObjectKind().GroupVersionKind().Kind))
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(manifest), live)).To(Succeed())
			dry := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(raw)}
			unstructured.RemoveNestedField(dry.Object, "status")
			g.Expect(k8sClient.Patch(ctx, dry, client.Apply, client.FieldOwner(manager), client.ForceOwnership, client.DryRunAll)).To(Succeed()) //nolint:staticcheck // the apply patch is what both tools send
			g.Expect(dry.Object["spec"]).To(Equal(live.Object["spec"]), "%s's server-side dry run predicts another spec than the live workload's", manager)
			g.Expect(dry.GetAnnotations()).To(Equal(live.GetAnnotations()), "%s's server-side dry run predicts other annotations", manager)
		}).WithTimeout(time.Minute).Should(Succeed())
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
		// The hard stage's rollout is the controller manager's: beside the
		// suite's other specs its ReplicaSet controller, which waits for its
		// cache to catch up with its own writes and backs off while it
		// waits, has taken past two minutes (explain shows the Deployment's
		// status beside the migration's).
		Eventually(phaseOf(ctx, env.Namespace, pm.Name)).WithTimeout(5*time.Minute).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, pm.Name))
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
		// A server dry run is answered as the change is, and writes nothing:
		// asked until the operator's snapshot has taken in the new nodes.
		Eventually(func(g Gomega) {
			_, errOut, code := kubectlApply(ctx, env.Namespace, []string{"--dry-run=server"}, manifest.DeepCopy())
			g.Expect(code).To(Equal(0), errOut)
			g.Expect(errOut).To(And(ContainSubstring("admitted as preferred (Adopt)"), ContainSubstring("RolloutDeadlock")))
		}).Should(Succeed())
		Expect(getDeployment(ctx, env.Namespace, "web").Annotations).NotTo(HaveKey(adoption.Annotation), "a dry run records nothing")
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
			g.Expect(named).To(ContainElement(placement.HazardRolloutDeadlock))
		}).Should(Succeed(), explain(ctx, env.Namespace, pm.Name))
		paa := getDeployment(ctx, env.Namespace, "web").Spec.Template.Spec.Affinity.PodAntiAffinity
		Expect(paa.RequiredDuringSchedulingIgnoredDuringExecution).To(BeEmpty(), "it stays soft")
		Expect(strings.Join(eventNotes(ctx, env.Namespace, "web", "Adopted"), "\n")).To(ContainSubstring(pm.Name), "an Event on the Deployment names the migration")
		allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 2)

		By("the author applies its manifest without the term: the soft form, the record and the migration go")
		before := getDeployment(ctx, env.Namespace, "web")
		reverted := manifestOf(before)
		reverted.Spec.Template.Spec.Affinity = nil
		_, errOut, code = kubectlApply(ctx, env.Namespace, nil, reverted.DeepCopy())
		Expect(code).To(Equal(0), errOut)
		Expect(errOut).To(ContainSubstring("no longer in kubectl's manifest"), "the records were %s", before.Annotations[adoption.Annotation])
		live := getDeployment(ctx, env.Namespace, "web")
		Expect(live.Spec.Template.Spec.Affinity).To(BeNil(), "the soft form the webhook wrote goes with the term")
		Expect(live.Annotations).NotTo(HaveKey(adoption.Annotation))
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(pm), &pgv1.PlacementMigration{}))
		}).Should(BeTrue(), "the operator deletes the migration of a constraint its author dropped")
		noDrift(ctx, env.Namespace, reverted)
	})
})

var _ = Describe("Adopt mode on a StatefulSet's zone spread", Label("operator", "admission", "statefulset"), func() {
	It("admits a DoNotSchedule zone spread as ScheduleAnyway, sees no drift on a re-apply, and hardens it in its place", func(ctx SpecContext) {
		env := newEnv(ctx, "adopt-sts")
		labelNamespace(ctx, env.Namespace, "Adopt")
		_, err := env.AddZones(ctx, []string{"a", "b", "c"}, 2)
		Expect(err).NotTo(HaveOccurred())
		db := utils.StatefulSet(env.Namespace, "db", env.Pool(), 3)
		Expect(k8sClient.Create(ctx, db)).To(Succeed())
		allRunning(ctx, env.Namespace, map[string]string{"app": "db"}, 3)
		manifest := getStatefulSet(ctx, env.Namespace, "db").DeepCopy()
		manifest.APIVersion, manifest.Kind = "apps/v1", "StatefulSet"
		manifest.ManagedFields, manifest.ResourceVersion, manifest.UID, manifest.Generation = nil, "", "", 0
		manifest.CreationTimestamp, manifest.Annotations, manifest.Status = metav1.Time{}, nil, appsv1.StatefulSetStatus{}
		// A hostname spread the chart had, and the zone spread the change adds before it.
		manifest.Spec.Template.Spec.TopologySpreadConstraints = append(utils.ZoneSpread(map[string]string{"app": "db"}), corev1.TopologySpreadConstraint{
			MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}})

		_, errOut, code := kubectlApply(ctx, env.Namespace, nil, manifest.DeepCopy())
		Expect(code).To(Equal(0), errOut)
		Expect(errOut).To(ContainSubstring("DoNotSchedule spread on topology.kubernetes.io/zone admitted as ScheduleAnyway (Adopt)"))
		tsc := getStatefulSet(ctx, env.Namespace, "db").Spec.Template.Spec.TopologySpreadConstraints
		Expect(tsc).To(HaveLen(2))
		Expect(tsc[0].TopologyKey).To(Equal(utils.ZoneLabel))
		Expect(tsc[0].WhenUnsatisfiable).To(Equal(corev1.ScheduleAnyway), "the zone spread is admitted soft, in its place")
		noDrift(ctx, env.Namespace, manifest)

		var pm *pgv1.PlacementMigration
		Eventually(func(g Gomega) { pm = adoptedMigration(ctx, env.Namespace, "db")(g) }).Should(Succeed())
		Expect(metav1.GetControllerOf(pm).Kind).To(Equal("StatefulSet"))
		soakNow(ctx, pm)
		// A StatefulSet replaces its pods one at a time, twice (the soft
		// form's rollout, then the hard one's).
		Eventually(phaseOf(ctx, env.Namespace, pm.Name)).WithTimeout(5*time.Minute).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, pm.Name))
		Expect(getStatefulSet(ctx, env.Namespace, "db").Spec.Template.Spec.TopologySpreadConstraints).To(Equal(manifest.Spec.Template.Spec.TopologySpreadConstraints),
			"the StatefulSet ends as its manifest says, the zone spread hard in first place")
		noDrift(ctx, env.Namespace, manifest)
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
