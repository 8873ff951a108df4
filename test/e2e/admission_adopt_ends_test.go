package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/adoption"
	"github.com/placement-guard/placement-guard/test/utils"
)

// adoptSeed000 admits seed 000's change to the graph DB in an Adopt
// namespace with one data node: soft, recorded, its migration made (it
// soaks the soft form, then waits for the second node). It returns the
// migration's name.
func adoptSeed000(ctx SpecContext, env *utils.Env) string {
	labelNamespace(ctx, env.Namespace, "Adopt")
	seed000(ctx, env)
	manifest := manifestOf(getDeployment(ctx, env.Namespace, "graphdb"))
	manifest.Spec.Template.Spec.Affinity = utils.HostnameAntiAffinity(map[string]string{"app": "search"})
	_, errOut, code := kubectlApply(ctx, env.Namespace, nil, manifest)
	Expect(code).To(Equal(0), errOut)
	Expect(errOut).To(ContainSubstring("admitted as preferred (Adopt)"))
	var name string
	Eventually(func(g Gomega) {
		pm := adoptedMigration(ctx, env.Namespace, "graphdb")(g)
		g.Expect(pm.Status.Phase).To(BeElementOf(pgv1.PhaseSoaking, pgv1.PhaseWaitingForCapacity))
		name = pm.Name
	}).Should(Succeed())
	return name
}

// recordOf is the graph DB's adoption record of the migration.
func recordOf(ctx SpecContext, namespace, migration string) *adoption.Record {
	rec, err := adoption.Find(getDeployment(ctx, namespace, "graphdb").Annotations, migration)
	Expect(err).NotTo(HaveOccurred())
	return rec
}

// staysSoftAndUnadopted checks, as a second data node joins and for a
// while after, that nothing makes the adopted constraint hard again: no
// migration, the soft form (or none) in the template.
func staysSoftAndUnadopted(ctx SpecContext, env *utils.Env) {
	_, err := env.AddNode(ctx, "data-2", map[string]string{"role": "data"})
	Expect(err).NotTo(HaveOccurred())
	Consistently(func(g Gomega) {
		var list pgv1.PlacementMigrationList
		g.Expect(k8sClient.List(ctx, &list, client.InNamespace(env.Namespace))).To(Succeed())
		g.Expect(list.Items).To(BeEmpty(), "no migration is made of an ended adoption")
		if a := getDeployment(ctx, env.Namespace, "graphdb").Spec.Template.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
			g.Expect(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution).To(BeEmpty(), "nothing hardened it")
		}
	}).WithTimeout(10 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
}

var _ = Describe("Adopt mode: a person stops an adopted change", Label("operator", "admission", "adopt"), func() {
	It("ends the adoption on kubectl placement abort: the soft form stays, nothing is made again or hardened when the node joins, and the manifest applied again stays soft", func(ctx SpecContext) {
		env := newEnv(ctx, "adopt-abort")
		name := adoptSeed000(ctx, env)
		Eventually(func() string { return recordOf(ctx, env.Namespace, name).Made }).ShouldNot(BeEmpty(), "the record names the migration made of it")

		By("kubectl placement abort by the on-call, saying what it did to the record")
		grantSteer(ctx, env.Namespace, "oncall")
		out, errOut, code := kubectlPlacement(ctx, "system:serviceaccount:"+env.Namespace+":oncall")("", "abort", "-n", env.Namespace, name, "--yes")
		Expect(code).To(Equal(0), out+errOut)
		Expect(out).To(And(ContainSubstring("Deployment/graphdb: the constraint kept in the soft form Adopt admitted; its adoption ended"),
			ContainSubstring("no migration is made of it again until kubectl changes it")))
		rec := recordOf(ctx, env.Namespace, name)
		Expect(rec).NotTo(BeNil())
		Expect(rec.Ended).To(ContainSubstring("aborted or deleted, and reverted"))
		paa := getDeployment(ctx, env.Namespace, "graphdb").Spec.Template.Spec.Affinity.PodAntiAffinity
		Expect(paa.PreferredDuringSchedulingIgnoredDuringExecution).To(HaveLen(1), "the revert gives back the soft form, never strips it")
		staysSoftAndUnadopted(ctx, env)

		By("the author's manifest applied again keeps it soft, and says why")
		manifest := manifestOf(getDeployment(ctx, env.Namespace, "graphdb"))
		manifest.Spec.Template.Spec.Affinity = utils.HostnameAntiAffinity(map[string]string{"app": "search"})
		_, errOut, code = kubectlApply(ctx, env.Namespace, nil, manifest)
		Expect(code).To(Equal(0), errOut)
		Expect(errOut).To(ContainSubstring("kept preferred: its adoption ended"))
		Expect(getDeployment(ctx, env.Namespace, "graphdb").Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution).To(BeEmpty())
		Consistently(func() []pgv1.PlacementMigration {
			var list pgv1.PlacementMigrationList
			Expect(k8sClient.List(ctx, &list, client.InNamespace(env.Namespace))).To(Succeed())
			return list.Items
		}, "3s").Should(BeEmpty())
	})

	It("ends the adoption on kubectl delete of the migration, as on an abort", func(ctx SpecContext) {
		env := newEnv(ctx, "adopt-delete")
		name := adoptSeed000(ctx, env)
		Eventually(func() string { return recordOf(ctx, env.Namespace, name).Made }).ShouldNot(BeEmpty())
		Expect(k8sClient.Delete(ctx, getMigration(ctx, env.Namespace, name))).To(Succeed())
		Eventually(func() string { return recordOf(ctx, env.Namespace, name).Ended }).Should(Equal("PlacementMigration " + name + " was deleted"))
		Expect(eventNotes(ctx, env.Namespace, "graphdb", "AdoptionEnded")).To(ContainElement(ContainSubstring("ended")))
		staysSoftAndUnadopted(ctx, env)
	})

	It("ends the adoption on kubectl rollout undo: the migration goes, and the node joining hardens nothing", func(ctx SpecContext) {
		env := newEnv(ctx, "adopt-undo")
		name := adoptSeed000(ctx, env)
		out, err := kubectl(ctx, "-n", env.Namespace, "rollout", "undo", "deployment/graphdb")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("taken back by admin: its adoption ended"), "kubectl rollout undo names no field manager: the user is named")
		Expect(recordOf(ctx, env.Namespace, name).Ended).To(Equal("taken back by admin"))
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: name}, &pgv1.PlacementMigration{}))
		}).Should(BeTrue(), "the operator deletes the migration of an ended adoption")
		Expect(getDeployment(ctx, env.Namespace, "graphdb").Spec.Template.Spec.Affinity).To(BeNil(), "the undo is kept as it left the template")
		staysSoftAndUnadopted(ctx, env)
	})

	It("ends the adoption of a verified soft stage taken back where the check did not see it: the operator never writes it back", func(ctx SpecContext) {
		env := newEnv(ctx, "adopt-unseen")
		name := adoptSeed000(ctx, env)
		Eventually(func() metav1.ConditionStatus {
			return conditionOf(ctx, env.Namespace, name, pgv1.ConditionSoftApplied).Status
		}).Should(Equal(metav1.ConditionTrue), "the adopted soft stage is verified")

		By("with the namespace Off, a JSON patch takes the constraint back unseen by the check, and keeps the record")
		labelNamespace(ctx, env.Namespace, "Off")
		out, err := kubectl(ctx, "-n", env.Namespace, "patch", "deployment/graphdb", "--type=json",
			"-p", `[{"op":"remove","path":"/spec/template/spec/affinity"}]`)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).NotTo(ContainSubstring("its adoption ended"), "the check did not see it")

		By("the reconciler ends the adoption, the migration goes, and nothing writes the constraint back")
		Eventually(func() string {
			if rec := recordOf(ctx, env.Namespace, name); rec != nil {
				return rec.Ended
			}
			return ""
		}).Should(HavePrefix("taken back by"))
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: name}, &pgv1.PlacementMigration{}))
		}).Should(BeTrue(), "the operator deletes the migration of an ended adoption")
		Expect(getDeployment(ctx, env.Namespace, "graphdb").Spec.Template.Spec.Affinity).To(BeNil(), "the undo is kept as it left the template")
		staysSoftAndUnadopted(ctx, env)
		Expect(getDeployment(ctx, env.Namespace, "graphdb").Spec.Template.Spec.Affinity).To(BeNil(), "nothing wrote the soft form back")
	})
})
