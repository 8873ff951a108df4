package controller

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/workloadpatch"
)

// The guards of the guard itself: what a lost record, a retry, a workload
// that joins later, a spec edited mid-stage and a second migration of the
// same workload do to a migration.

func zoneSpreadOf(labels map[string]string) pgv1.Constraint {
	return pgv1.Constraint{TopologySpread: &pgv1.TopologySpreadConstraint{TopologyKey: corev1.LabelTopologyZone, MaxSkew: 1, LabelSelector: pgv1.Labels(labels)}}
}

func hostnameSpreadOf(labels map[string]string) pgv1.Constraint {
	return pgv1.Constraint{TopologySpread: &pgv1.TopologySpreadConstraint{TopologyKey: corev1.LabelHostname, MaxSkew: 1, LabelSelector: pgv1.Labels(labels)}}
}

// zonalNodes creates two nodes in each of zones a and b.
func (fc *fakeCluster) zonalNodes() {
	for _, n := range []struct{ name, zone string }{{"a1", "a"}, {"a2", "a"}, {"b1", "b"}, {"b2", "b"}} {
		fc.node(n.name, map[string]string{corev1.LabelTopologyZone: n.zone})
	}
}

// succeed plays the rollouts of a migration of one target, its pods on
// nodes, until it succeeds.
func (fc *fakeCluster) succeed(migration, target string, nodes ...string) {
	Eventually(fc.phase(migration)).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain(migration))
	fc.rollOut(target, nodes...)
	Eventually(fc.phase(migration)).Should(Equal(pgv1.PhaseApplyingHard), fc.explain(migration))
	fc.rollOut(target, nodes...)
	Eventually(fc.phase(migration)).Should(Equal(pgv1.PhaseSucceeded), fc.explain(migration))
}

// rolledBackByTimeout starts migration name on the simplest target and
// lets its soft stage time out, up to the rollback's write.
func (fc *fakeCluster) rolledBackByTimeout(name string) {
	fc.webWithRoomToSpread()
	fc.migration(name, pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameAntiAffinity(nil),
		StageTimeout: &metav1.Duration{Duration: 10 * time.Minute}})
	Eventually(fc.phase(name)).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain(name))
	testClock.Step(11 * time.Minute)
	poke(fc, name)
	Eventually(fc.phase(name)).Should(Equal(pgv1.PhaseRollingBack), fc.explain(name))
}

// soaking starts migration name on the simplest target and plays its soft
// stage's rollout, up to a ten-minute soak.
func (fc *fakeCluster) soaking(name string) {
	fc.webWithRoomToSpread()
	fc.migration(name, pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameAntiAffinity(nil),
		SoakDuration: &metav1.Duration{Duration: 10 * time.Minute}})
	Eventually(fc.phase(name)).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain(name))
	fc.rollOut("web", "n1")
	Eventually(fc.phase(name)).Should(Equal(pgv1.PhaseSoaking), fc.explain(name))
}

// clearRecords plays the loss of every record of the migration: its status
// as if the operator died before it wrote any.
func (fc *fakeCluster) clearRecords(name string) {
	pm := fc.pm(name)
	patch := client.MergeFrom(pm.DeepCopy())
	pm.Status = pgv1.PlacementMigrationStatus{}
	Expect(k8sClient.Status().Patch(ctx, pm, patch)).To(Succeed())
}

var _ = Describe("A guarded migration", func() {
	var fc *fakeCluster
	BeforeEach(func() { fc = newFakeCluster() })

	It("verifies and soaks again a soft stage whose record was lost, before the hard stage", func() {
		fc.soaking("web-apart")

		By("losing every record, as if the operator had died before writing them")
		fc.clearRecords("web-apart")
		Eventually(func() metav1.Condition { return fc.condition("web-apart", pgv1.ConditionSoftApplied) }).Should(HaveField("Reason", pgv1.ReasonStageVerified))
		Eventually(fc.phase("web-apart")).Should(Equal(pgv1.PhaseSoaking), fc.explain("web-apart"))
		Expect(fc.pm("web-apart").Status.Targets[0].Verified.At.Time).To(BeTemporally("~", testClock.Now(), 5*time.Second), "the soak starts again")
		Expect(fc.antiAffinityOf("web").RequiredDuringSchedulingIgnoredDuringExecution).To(BeEmpty(), "Hard is never applied without a soak")
		generation := fc.get("web").Generation
		Consistently(func() int64 { return fc.get("web").Generation }, "1s").Should(Equal(generation), "verifying writes nothing")
		Eventually(fc.eventReasons("web-apart")).Should(ContainElement(pgv1.ReasonUnverified))
	})

	It("restarts a rolled back migration from its last verified stage when the retry annotation changes, once per value", func() {
		fc.rolledBackByTimeout("web-slow")
		fc.rollOut("web", "n1")
		Eventually(fc.phase("web-slow")).Should(Equal(pgv1.PhaseRolledBack), fc.explain("web-slow"))
		generation := fc.pm("web-slow").Generation

		By("setting the retry annotation, without a spec edit")
		retry := func(value string) {
			pm := fc.pm("web-slow")
			patch := client.MergeFrom(pm.DeepCopy())
			pm.Annotations = map[string]string{pgv1.RetryAnnotation: value}
			Expect(k8sClient.Patch(ctx, pm, patch)).To(Succeed())
		}
		retry("2026-11-23T10:00:00Z")
		Eventually(fc.phase("web-slow")).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain("web-slow"))
		Expect(fc.pm("web-slow").Generation).To(Equal(generation), "no spec change was needed")
		Expect(fc.pm("web-slow").Status.LastHandledRetry).To(Equal("2026-11-23T10:00:00Z"))
		Eventually(fc.eventReasons("web-slow")).Should(ContainElement(pgv1.ReasonRetried))
	})

	It("takes a workload that starts to match the targetSelector after success through every stage, leaving the others alone", func() {
		fc.node("n1", nil)
		fc.node("n2", nil)
		fc.node("n3", nil)
		team := map[string]string{"team": "checkout"}
		fc.deployment("api", 1, func(d *appsv1.Deployment) { d.Labels = team })
		fc.rollOut("api", "n1")
		fc.migration("checkout-apart", pgv1.PlacementMigrationSpec{
			TargetSelector: &pgv1.TargetSelector{Kinds: []pgv1.WorkloadKind{pgv1.KindDeployment}, Selector: *pgv1.Labels(team)},
			Constraint:     hostnameAntiAffinity(nil),
		})
		fc.succeed("checkout-apart", "api", "n1")
		apiGeneration := fc.get("api").Generation

		By("labelling a second Deployment into the set")
		fc.deployment("worker", 1)
		fc.rollOut("worker", "n2")
		w := fc.get("worker")
		patch := client.MergeFrom(w.DeepCopy())
		w.Labels = team
		Expect(k8sClient.Patch(ctx, w, patch)).To(Succeed())
		Eventually(fc.phase("checkout-apart")).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain("checkout-apart"))
		aa := fc.antiAffinityOf("worker")
		Expect(aa.RequiredDuringSchedulingIgnoredDuringExecution).To(BeEmpty(), "a new target starts at the soft stage, never straight at the final one")
		Expect(aa.PreferredDuringSchedulingIgnoredDuringExecution).To(HaveLen(1))
		fc.rollOut("worker", "n2")
		Eventually(fc.phase("checkout-apart")).Should(Equal(pgv1.PhaseApplyingHard), fc.explain("checkout-apart"))
		fc.rollOut("worker", "n2")
		Eventually(fc.phase("checkout-apart")).Should(Equal(pgv1.PhaseSucceeded), fc.explain("checkout-apart"))
		Expect(fc.get("api").Generation).To(Equal(apiGeneration), "the first target was not written again")
		Expect(fc.pm("checkout-apart").Status.Targets).To(HaveLen(2))
	})

	It("finishes the stage in flight as recorded when the constraint is edited mid-stage, then starts over with the new one", func() {
		fc.zonalNodes()
		fc.deployment("web", 2)
		fc.rollOut("web", "a1", "b1")
		fc.migration("web-spread", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameSpreadOf(map[string]string{"app": "web"})})
		Eventually(fc.phase("web-spread")).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain("web-spread"))
		fc.rollOut("web", "a1", "b1")
		Eventually(fc.phase("web-spread")).Should(Equal(pgv1.PhaseApplyingHard), fc.explain("web-spread"))

		By("editing the constraint while the hard stage rolls out")
		editSpec(fc, "web-spread", func(s *pgv1.PlacementMigrationSpec) { s.Constraint = zoneSpreadOf(map[string]string{"app": "web"}) })
		Consistently(func() string {
			return fc.get("web").Spec.Template.Spec.TopologySpreadConstraints[0].TopologyKey
		}, "1s").Should(Equal(corev1.LabelHostname), "the recorded stage is finished first")
		op := fc.pm("web-spread").Status.Operation
		Expect(op).NotTo(BeNil())
		Expect(op.Stage).To(Equal(pgv1.StageHard))
		fc.rollOut("web", "a1", "b1")

		By("starting over with the new constraint: soft first, replacing the old entry")
		Eventually(func() string {
			tsc := fc.get("web").Spec.Template.Spec.TopologySpreadConstraints
			if len(tsc) != 1 {
				return ""
			}
			return tsc[0].TopologyKey + "/" + string(tsc[0].WhenUnsatisfiable)
		}).Should(Equal(corev1.LabelTopologyZone+"/"+string(corev1.ScheduleAnyway)), fc.explain("web-spread"))
		Expect(fc.condition("web-spread", pgv1.ConditionHardApplied).Reason).To(Equal(pgv1.ReasonStageVerified), "the edited-away stage was verified, not abandoned")
		fc.rollOut("web", "a1", "b1")
		Eventually(fc.phase("web-spread")).Should(Equal(pgv1.PhaseApplyingHard), fc.explain("web-spread"))
		fc.rollOut("web", "a1", "b1")
		Eventually(fc.phase("web-spread")).Should(Equal(pgv1.PhaseSucceeded), fc.explain("web-spread"))
		tsc := fc.get("web").Spec.Template.Spec.TopologySpreadConstraints
		Expect(tsc).To(HaveLen(1))
		Expect(tsc[0].TopologyKey).To(Equal(corev1.LabelTopologyZone))
	})

	It("lets two migrations with compatible constraints share a workload, each writing once per stage, one at a time", func() {
		fc.zonalNodes()
		fc.deployment("web", 2)
		fc.rollOut("web", "a1", "b1")
		fc.migration("web-zones", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: zoneSpreadOf(map[string]string{"app": "web"})})
		fc.migration("web-hosts", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameSpreadOf(map[string]string{"app": "web"})})

		By("one stage in flight at a time: the other waits, naming it")
		Eventually(func() []string {
			return []string{string(fc.pm("web-zones").Status.Phase), string(fc.pm("web-hosts").Status.Phase)}
		}).Should(ContainElement(string(pgv1.PhaseApplyingSoft)))
		waiting := "web-hosts"
		if fc.pm("web-hosts").Status.Operation != nil {
			waiting = "web-zones"
		}
		Eventually(func() string { return fc.condition(waiting, pgv1.ConditionReady).Reason }).Should(Equal(pgv1.ReasonWaitingForMigration))
		Expect(fc.condition(waiting, pgv1.ConditionReady).Message).To(ContainSubstring("PlacementMigration web-"))

		By("rolling out every write until both succeed")
		Eventually(func() bool {
			if fc.get("web").Status.ObservedGeneration != fc.get("web").Generation {
				fc.rollOut("web", "a1", "b1")
			}
			return fc.pm("web-zones").Status.Phase == pgv1.PhaseSucceeded && fc.pm("web-hosts").Status.Phase == pgv1.PhaseSucceeded
		}, "30s", "200ms").Should(BeTrue(), func() string { return fc.explain("web-zones")() + "\n" + fc.explain("web-hosts")() })
		tsc := fc.get("web").Spec.Template.Spec.TopologySpreadConstraints
		Expect(tsc).To(HaveLen(2))
		keys := []string{tsc[0].TopologyKey, tsc[1].TopologyKey}
		Expect(keys).To(ConsistOf(corev1.LabelTopologyZone, corev1.LabelHostname))
		Expect(fc.get("web").Generation).To(Equal(int64(5)), "created at 1, then once per stage of each migration")
		managers := fc.managersOf("web")
		Expect(managers).To(HaveKey(workloadpatch.FieldManager("web-zones")))
		Expect(managers).To(HaveKey(workloadpatch.FieldManager("web-hosts")))
	})

	It("blocks a second anti-affinity migration of a workload, naming the first, and writes nothing", func() {
		fc.webWithRoomToSpread()
		fc.migration("web-apart", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameAntiAffinity(nil)})
		fc.succeed("web-apart", "web", "n1")
		generation := fc.get("web").Generation

		fc.migration("web-apart-zones", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"),
			Constraint: pgv1.Constraint{PodAntiAffinity: &pgv1.PodAntiAffinityConstraint{TopologyKey: corev1.LabelTopologyZone}}})
		Eventually(fc.phase("web-apart-zones")).Should(Equal(pgv1.PhaseBlocked), fc.explain("web-apart-zones"))
		ready := fc.condition("web-apart-zones", pgv1.ConditionReady)
		Expect(ready.Reason).To(Equal(pgv1.ReasonTargetClaimed))
		Expect(ready.Message).To(ContainSubstring("PlacementMigration web-apart"))
		Consistently(func() int64 { return fc.get("web").Generation }, "2s").Should(Equal(generation))
		Expect(fc.managersOf("web")).NotTo(HaveKey(workloadpatch.FieldManager("web-apart-zones")))
		Expect(placement.StageOfEntry(&corev1.PodSpec{Affinity: &corev1.Affinity{PodAntiAffinity: fc.antiAffinityOf("web")}})).To(Equal(pgv1.StageHard))
	})

	It("blocks a selector that selects more workloads than the status can record, before any write", func() {
		fc.node("n1", nil)
		many := map[string]string{"tier": "many"}
		for i := range 51 {
			fc.deployment(fmt.Sprintf("w%02d", i), 1, func(d *appsv1.Deployment) { d.Labels = many })
		}
		fc.migration("too-many", pgv1.PlacementMigrationSpec{
			TargetSelector: &pgv1.TargetSelector{Kinds: []pgv1.WorkloadKind{pgv1.KindDeployment}, Selector: *pgv1.Labels(many)},
			Constraint:     hostnameAntiAffinity(nil),
		})
		Eventually(fc.phase("too-many")).Should(Equal(pgv1.PhaseBlocked), fc.explain("too-many"))
		Expect(fc.condition("too-many", pgv1.ConditionReady).Reason).To(Equal(pgv1.ReasonTooManyTargets))
		Expect(fc.condition("too-many", pgv1.ConditionReady).Message).To(ContainSubstring("selects 51 workloads; a migration records at most 50"))
		Expect(fc.pm("too-many").Status.Targets).To(BeEmpty())
		Expect(fc.get("w00").Generation).To(Equal(int64(1)))
	})

	DescribeTable("reverts or keeps the entry of a workload that stops matching the targetSelector, as onDelete says",
		func(policy pgv1.DeletionPolicy) {
			fc.node("n1", nil)
			fc.node("n2", nil)
			team := map[string]string{"team": "checkout"}
			for _, name := range []string{"api", "worker"} {
				fc.deployment(name, 1, func(d *appsv1.Deployment) { d.Labels = team })
				fc.rollOut(name, "n1")
			}
			fc.migration("checkout-soft", pgv1.PlacementMigrationSpec{
				TargetSelector: &pgv1.TargetSelector{Kinds: []pgv1.WorkloadKind{pgv1.KindDeployment}, Selector: *pgv1.Labels(team)},
				Constraint:     hostnameAntiAffinity(nil), FinalStage: pgv1.StageSoft, OnDelete: policy,
			})
			Eventually(fc.phase("checkout-soft")).Should(Equal(pgv1.PhaseApplyingSoft), fc.explain("checkout-soft"))
			fc.rollOut("api", "n1")
			fc.rollOut("worker", "n1")
			Eventually(fc.phase("checkout-soft")).Should(Equal(pgv1.PhaseSucceeded), fc.explain("checkout-soft"))

			By("taking worker out of the set")
			w := fc.get("worker")
			patch := client.MergeFrom(w.DeepCopy())
			w.Labels = map[string]string{"team": "payments"}
			Expect(k8sClient.Patch(ctx, w, patch)).To(Succeed())
			Eventually(func() []string {
				var names []string
				for _, ts := range fc.pm("checkout-soft").Status.Targets {
					names = append(names, ts.Name)
				}
				return names
			}).Should(Equal([]string{"api"}), fc.explain("checkout-soft"))
			if policy == pgv1.DeletionRevert {
				Eventually(fc.antiAffinityOf).WithArguments("worker").Should(BeNil(), "the entry is removed")
			} else {
				Consistently(func() *corev1.PodAntiAffinity { return fc.antiAffinityOf("worker") }, "1s").ShouldNot(BeNil(), "the entry stays")
			}
			Expect(fc.antiAffinityOf("api")).NotTo(BeNil(), "the remaining target keeps its entry")
			Eventually(fc.phase("checkout-soft")).Should(Equal(pgv1.PhaseSucceeded), fc.explain("checkout-soft"))
		},
		Entry("Retain", pgv1.DeletionRetain),
		Entry("Revert", pgv1.DeletionRevert),
	)
})
