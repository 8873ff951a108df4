package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/plugin"
	"github.com/placement-guard/placement-guard/test/utils"
)

// The ends of a migration on the local cluster, the paths people take on
// their worst day: an abort, a migration blocked before it wrote anything,
// a target stuck for a cause of its own, a paused target, a delete after
// the target was re-created.
var _ = Describe("The ends of a migration", Label("operator", "edges"), func() {
	// twoNodesWeb is the simplest target: web's two pods on two of three
	// nodes, room for a soft hostname spread.
	twoNodesWeb := func(ctx SpecContext, env *utils.Env, mutate ...func(*appsv1.Deployment)) {
		for _, n := range []string{"node-0", "node-1", "node-2"} {
			_, err := env.AddNode(ctx, n, nil)
			Expect(err).NotTo(HaveOccurred())
		}
		web := utils.Deployment(env.Namespace, "web", env.Pool(), 2, nil)
		for _, m := range mutate {
			m(web)
		}
		Expect(k8sClient.Create(ctx, web)).To(Succeed())
		allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 2)
	}
	antiAffinity := func(ctx SpecContext, namespace string) *corev1.PodAntiAffinity {
		d := getDeployment(ctx, namespace, "web")
		if d.Spec.Template.Spec.Affinity == nil {
			return nil
		}
		return d.Spec.Template.Spec.Affinity.PodAntiAffinity
	}

	It("aborts a Retain migration under the steer role: the constraint is removed every time, and the plugin says so only once it is", func(ctx SpecContext) {
		env := newEnv(ctx, "abort")
		twoNodesWeb(ctx, env)
		grantSteer(ctx, env.Namespace, "oncall")
		kp := kubectlPlacement(ctx, "system:serviceaccount:"+env.Namespace+":oncall")
		migration(ctx, env.Namespace, "web-apart", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameApart(nil), FinalStage: pgv1.StageSoft})
		Eventually(phaseOf(ctx, env.Namespace, "web-apart")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "web-apart"))
		Expect(getMigration(ctx, env.Namespace, "web-apart").Spec.OnDelete).To(Equal(pgv1.DeletionRetain))
		Expect(antiAffinity(ctx, env.Namespace).PreferredDuringSchedulingIgnoredDuringExecution).To(HaveLen(1))

		out, errOut, code := kp("", "abort", "-n", env.Namespace, "web-apart", "--yes", "--timeout", "2m")
		Expect(code).To(Equal(plugin.ExitOK), out+errOut)
		Expect(out).To(And(ContainSubstring("deleted after its revert"), ContainSubstring("Deployment/web: reverted, no placement field of the migration left")))
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: "web-apart"}, &pgv1.PlacementMigration{}))).To(BeTrue())
		aa := antiAffinity(ctx, env.Namespace)
		Expect(aa == nil || len(aa.PreferredDuringSchedulingIgnoredDuringExecution) == 0).To(BeTrue(), "the soft term is gone: %+v", aa)
	})

	It("stays Blocked, not RolledBack, when the first stage would recreate a protected pod, and goes on once it is no longer protected", func(ctx SpecContext) {
		env := newEnv(ctx, "blocked-protected")
		twoNodesWeb(ctx, env)
		labelPods := func(value string) {
			pods, err := utils.PodsOf(ctx, k8sClient, env.Namespace, map[string]string{"app": "web"})
			Expect(err).NotTo(HaveOccurred())
			for i := range pods {
				p := &pods[i]
				patch := client.MergeFrom(p.DeepCopy())
				if value == "" {
					delete(p.Labels, "tier")
				} else {
					p.Labels["tier"] = value
				}
				Expect(k8sClient.Patch(ctx, p, patch)).To(Succeed())
			}
		}
		labelPods("critical")
		migration(ctx, env.Namespace, "web-apart", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameApart(nil), FinalStage: pgv1.StageSoft,
			Guards: &pgv1.Guards{ProtectedPods: pgv1.Labels(map[string]string{"tier": "critical"})}})
		Eventually(phaseOf(ctx, env.Namespace, "web-apart")).Should(Equal(pgv1.PhaseBlocked), explain(ctx, env.Namespace, "web-apart"))
		Consistently(phaseOf(ctx, env.Namespace, "web-apart")).WithTimeout(5*time.Second).Should(Equal(pgv1.PhaseBlocked), explain(ctx, env.Namespace, "web-apart"))
		Expect(getMigration(ctx, env.Namespace, "web-apart").Status.Halt).To(BeNil())
		Expect(getDeployment(ctx, env.Namespace, "web").Generation).To(Equal(int64(1)))

		labelPods("")
		Eventually(phaseOf(ctx, env.Namespace, "web-apart")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "web-apart"))
	})

	It("says Stalled within the grace when another team points the target at nodes that do not exist mid-soak, and goes on once they fix it", func(ctx SpecContext) {
		env := newEnv(ctx, "outside-cause")
		twoNodesWeb(ctx, env)
		migration(ctx, env.Namespace, "web-apart", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameApart(nil),
			SoakDuration: &metav1.Duration{Duration: 10 * time.Minute}})
		Eventually(phaseOf(ctx, env.Namespace, "web-apart")).Should(Equal(pgv1.PhaseSoaking), explain(ctx, env.Namespace, "web-apart"))

		setPool := func(pool string) {
			d := getDeployment(ctx, env.Namespace, "web")
			patch := client.MergeFrom(d.DeepCopy())
			d.Spec.Template.Spec.NodeSelector[utils.PoolLabel] = pool
			Expect(k8sClient.Patch(ctx, d, patch, client.FieldOwner("other-team"))).To(Succeed())
		}
		setPool("pool-that-does-not-exist")
		Eventually(func() metav1.Condition { return conditionOf(ctx, env.Namespace, "web-apart", pgv1.ConditionStalled) }).WithTimeout(time.Minute).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", pgv1.ReasonTargetPodsPending),
			HaveField("Message", And(ContainSubstring("didn't match Pod's node affinity/selector"), ContainSubstring("does not cause")))),
			explain(ctx, env.Namespace, "web-apart"))
		Expect(getMigration(ctx, env.Namespace, "web-apart").Status.Phase).To(Equal(pgv1.PhaseBlocked))

		setPool(env.Pool())
		Eventually(phaseOf(ctx, env.Namespace, "web-apart")).Should(Equal(pgv1.PhaseSoaking), explain(ctx, env.Namespace, "web-apart"))
		Expect(conditionOf(ctx, env.Namespace, "web-apart", pgv1.ConditionStalled).Type).To(BeEmpty())
	})

	It("waits for a paused Deployment instead of timing its stage out, and completes after kubectl rollout resume", func(ctx SpecContext) {
		env := newEnv(ctx, "paused")
		twoNodesWeb(ctx, env)
		setPaused := func(paused bool) {
			d := getDeployment(ctx, env.Namespace, "web")
			patch := client.MergeFrom(d.DeepCopy())
			d.Spec.Paused = paused
			Expect(k8sClient.Patch(ctx, d, patch)).To(Succeed())
		}
		setPaused(true)
		migration(ctx, env.Namespace, "web-apart", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameApart(nil), FinalStage: pgv1.StageSoft,
			StageTimeout: &metav1.Duration{Duration: 30 * time.Second}})
		Eventually(func() metav1.Condition { return conditionOf(ctx, env.Namespace, "web-apart", pgv1.ConditionReady) }).Should(And(
			HaveField("Reason", pgv1.ReasonTargetPaused), HaveField("Message", ContainSubstring("Deployment/web is paused"))), explain(ctx, env.Namespace, "web-apart"))
		By("past the stage timeout, nothing was written and nothing rolled back")
		Consistently(func() int64 { return getDeployment(ctx, env.Namespace, "web").Generation }).WithTimeout(35 * time.Second).WithPolling(time.Second).Should(Equal(int64(2)))
		Expect(getMigration(ctx, env.Namespace, "web-apart").Status.Phase).NotTo(Equal(pgv1.PhaseRolledBack))

		setPaused(false)
		Eventually(phaseOf(ctx, env.Namespace, "web-apart")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "web-apart"))
	})

	It("lets an onDelete Revert migration go when its target was deleted and created again, and leaves the new one alone", func(ctx SpecContext) {
		env := newEnv(ctx, "recreated")
		twoNodesWeb(ctx, env)
		migration(ctx, env.Namespace, "web-apart", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameApart(nil), FinalStage: pgv1.StageSoft,
			OnDelete: pgv1.DeletionRevert})
		Eventually(phaseOf(ctx, env.Namespace, "web-apart")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "web-apart"))
		Eventually(func() []string { return getMigration(ctx, env.Namespace, "web-apart").Finalizers }).Should(ContainElement(pgv1.RevertFinalizer))

		old := getDeployment(ctx, env.Namespace, "web")
		Expect(k8sClient.Delete(ctx, old)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(old), &appsv1.Deployment{}))
		}).Should(BeTrue())
		Expect(k8sClient.Create(ctx, utils.Deployment(env.Namespace, "web", env.Pool(), 2, nil))).To(Succeed())
		Expect(k8sClient.Delete(ctx, getMigration(ctx, env.Namespace, "web-apart"))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: "web-apart"}, &pgv1.PlacementMigration{}))
		}).WithTimeout(30*time.Second).Should(BeTrue(), explain(ctx, env.Namespace, "web-apart"))
		now := getDeployment(ctx, env.Namespace, "web")
		Expect(now.UID).NotTo(Equal(old.UID))
		Expect(now.Generation).To(Equal(int64(1)), "the new Deployment is never written")
		for _, mf := range now.ManagedFields {
			Expect(mf.Manager).NotTo(ContainSubstring("web-apart"))
		}
	})
})

var _ = Describe("A target leaving a shared spread", Label("operator", "edges", "incident-004"), func() {
	It("keeps the leaver's spread and counts its pods with the set: the migration stays Succeeded and the target that stays is not written again", func(ctx SpecContext) {
		env := newEnv(ctx, "leaver")
		_, err := env.AddZones(ctx, []string{"a", "b", "c"}, 1)
		Expect(err).NotTo(HaveOccurred())
		partOf := map[string]string{"app.kubernetes.io/part-of": "flux"}
		for _, name := range []string{"source-controller", "kustomize-controller"} {
			Expect(k8sClient.Create(ctx, utils.Deployment(env.Namespace, name, env.Pool(), 1, partOf))).To(Succeed())
		}
		allRunning(ctx, env.Namespace, partOf, 2)
		migration(ctx, env.Namespace, "flux-spread", pgv1.PlacementMigrationSpec{
			TargetSelector: &pgv1.TargetSelector{Selector: *pgv1.Labels(partOf)},
			Constraint: pgv1.Constraint{TopologySpread: &pgv1.TopologySpreadConstraint{TopologyKey: utils.ZoneLabel, MaxSkew: 1,
				LabelSelector: pgv1.Labels(partOf)}},
			// Soft, as seed 004's fix was: the targets of one stage roll
			// out together, and a hard spread over the set can end skewed
			// when their surge pods all take the emptiest zone.
			FinalStage: pgv1.StageSoft,
		})
		Eventually(phaseOf(ctx, env.Namespace, "flux-spread")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "flux-spread"))
		stays := getDeployment(ctx, env.Namespace, "source-controller")

		By("kustomize-controller loses the part-of label on the Deployment object")
		leaver := getDeployment(ctx, env.Namespace, "kustomize-controller")
		patch := client.MergeFrom(leaver.DeepCopy())
		delete(leaver.Labels, "app.kubernetes.io/part-of")
		Expect(k8sClient.Patch(ctx, leaver, patch)).To(Succeed())
		Eventually(func() []pgv1.RetainedTarget { return getMigration(ctx, env.Namespace, "flux-spread").Status.Retained }).Should(ConsistOf(
			And(HaveField("Kind", pgv1.KindDeployment), HaveField("Name", "kustomize-controller"))), explain(ctx, env.Namespace, "flux-spread"))
		Eventually(phaseOf(ctx, env.Namespace, "flux-spread")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "flux-spread"))
		Consistently(func(g Gomega) {
			pm := getMigration(ctx, env.Namespace, "flux-spread")
			g.Expect(pm.Status.Phase).To(Equal(pgv1.PhaseSucceeded))
			g.Expect(getDeployment(ctx, env.Namespace, "source-controller").Generation).To(Equal(stays.Generation), "the target that stays is not written again")
		}).WithTimeout(5*time.Second).Should(Succeed(), explain(ctx, env.Namespace, "flux-spread"))
		kept := getDeployment(ctx, env.Namespace, "kustomize-controller").Spec.Template.Spec.TopologySpreadConstraints
		Expect(kept).To(ContainElement(And(HaveField("TopologyKey", utils.ZoneLabel), HaveField("WhenUnsatisfiable", corev1.ScheduleAnyway))), "onDelete Retain keeps the leaver's spread")

		By("it joins again: verified as it is, not written")
		generation := getDeployment(ctx, env.Namespace, "kustomize-controller").Generation
		leaver = getDeployment(ctx, env.Namespace, "kustomize-controller")
		patch = client.MergeFrom(leaver.DeepCopy())
		leaver.Labels["app.kubernetes.io/part-of"] = "flux"
		Expect(k8sClient.Patch(ctx, leaver, patch)).To(Succeed())
		Eventually(func() []pgv1.RetainedTarget { return getMigration(ctx, env.Namespace, "flux-spread").Status.Retained }).Should(BeEmpty())
		Eventually(phaseOf(ctx, env.Namespace, "flux-spread")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "flux-spread"))
		Expect(getDeployment(ctx, env.Namespace, "kustomize-controller").Generation).To(Equal(generation))
		Expect(getDeployment(ctx, env.Namespace, "source-controller").Generation).To(Equal(stays.Generation))
	})
})
