package controller

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// Targets sharing one spread (seed 004's shape): a target that leaves the
// set keeps its entry under onDelete Retain and is counted with the set,
// and the targets that stay are never written again for it.
var _ = Describe("A target leaving a shared spread", func() {
	var fc *fakeCluster
	BeforeEach(func() { fc = newFakeCluster() })

	relabel := func(name string, labels map[string]string) {
		d := fc.get(name)
		patch := client.MergeFrom(d.DeepCopy())
		d.Labels = labels
		Expect(k8sClient.Patch(ctx, d, patch)).To(Succeed())
	}

	It("keeps the targets that stay verified as written, records the leaver as retained, and verifies it without a write when it joins again", func() {
		fc.node("n1", nil)
		fc.node("n2", nil)
		fc.node("n3", nil)
		partOf := map[string]string{"app.kubernetes.io/part-of": "flux"}
		for _, name := range []string{"source", "kustomize"} {
			fc.deployment(name, 1, func(d *appsv1.Deployment) {
				d.Labels = map[string]string{"app": name, "app.kubernetes.io/part-of": "flux"}
				d.Spec.Template.Labels["app.kubernetes.io/part-of"] = "flux"
			})
		}
		fc.rollOut("source", "n1")
		fc.rollOut("kustomize", "n1")
		fc.migration("flux-spread", pgv1.PlacementMigrationSpec{
			TargetSelector: &pgv1.TargetSelector{Kinds: []pgv1.WorkloadKind{pgv1.KindDeployment}, Selector: *pgv1.Labels(partOf)},
			Constraint:     hostnameSpreadOf(partOf),
		})
		Eventually(fc.phase("flux-spread")).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain("flux-spread"))
		fc.rollOut("source", "n1")
		fc.rollOut("kustomize", "n2")
		Eventually(fc.phase("flux-spread")).Should(Equal(pgv1.PhaseApplyingHard), fc.explain("flux-spread"))
		fc.rollOut("source", "n1")
		fc.rollOut("kustomize", "n2")
		Eventually(fc.phase("flux-spread")).Should(Equal(pgv1.PhaseSucceeded), fc.explain("flux-spread"))
		spread := fc.get("source").Spec.Template.Spec.TopologySpreadConstraints
		Expect(spread).To(HaveLen(1))
		Expect(spread[0].MatchLabelKeys).To(BeEmpty(), "a selector over the set counts the set together")
		source := fc.get("source").Generation

		By("kustomize leaves the set")
		relabel("kustomize", map[string]string{"app": "kustomize"})
		Eventually(func() []pgv1.RetainedTarget { return fc.pm("flux-spread").Status.Retained }).Should(ConsistOf(
			And(HaveField("Name", "kustomize"), HaveField("Applied", Not(BeNil())))), fc.explain("flux-spread"))
		Eventually(fc.phase("flux-spread")).Should(Equal(pgv1.PhaseSucceeded), fc.explain("flux-spread"))
		poke(fc, "flux-spread")
		Consistently(func() int64 { return fc.get("source").Generation }, "1s").Should(Equal(source), "the target that stays keeps the entry it was verified with")
		Expect(fc.pm("flux-spread").Status.Phase).To(Equal(pgv1.PhaseSucceeded))
		Expect(fc.get("kustomize").Spec.Template.Spec.TopologySpreadConstraints).To(ContainElement(HaveField("WhenUnsatisfiable", corev1.DoNotSchedule)))

		By("kustomize joins again: verified as it is, nothing written")
		kustomize := fc.get("kustomize").Generation
		relabel("kustomize", map[string]string{"app": "kustomize", "app.kubernetes.io/part-of": "flux"})
		Eventually(func() []pgv1.RetainedTarget { return fc.pm("flux-spread").Status.Retained }).Should(BeEmpty())
		Eventually(fc.phase("flux-spread")).Should(Equal(pgv1.PhaseSucceeded), fc.explain("flux-spread"))
		Expect(fc.get("kustomize").Generation).To(Equal(kustomize))
		Expect(fc.get("source").Generation).To(Equal(source))
	})
})
