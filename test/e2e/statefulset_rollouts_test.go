package e2e

import (
	"time"

	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/test/utils"
)

// statefulSetOnePerNode starts a StatefulSet whose pods db-0, db-1, ...
// run on nodes node-0, node-1, ... of the spec's pool: each node joins, the
// others cordoned, as the StatefulSet scales up by one.
func statefulSetOnePerNode(ctx SpecContext, env *utils.Env, replicas int, mutate func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
	sts := utils.StatefulSet(env.Namespace, "db", env.Pool(), 0)
	if mutate != nil {
		mutate(sts)
	}
	Expect(k8sClient.Create(ctx, sts)).To(Succeed())
	var nodes []string
	for i := range replicas {
		for _, n := range nodes {
			Expect(cluster.CordonNode(ctx, n)).To(Succeed())
		}
		node, err := env.AddNode(ctx, fmt.Sprintf("node-%d", i), nil)
		Expect(err).NotTo(HaveOccurred())
		nodes = append(nodes, node)
		patch := client.MergeFrom(sts.DeepCopy())
		sts.Spec.Replicas = ptr.To(int32(i + 1))
		Expect(k8sClient.Patch(ctx, sts, patch)).To(Succeed())
		Expect(env.WaitRunning(ctx, map[string]string{"app": "db"}, i+1)).To(Succeed())
	}
	for _, n := range nodes {
		Expect(cluster.UncordonNode(ctx, n)).To(Succeed())
	}
	pods := allRunning(ctx, env.Namespace, map[string]string{"app": "db"}, replicas)
	for _, p := range pods {
		Expect(p.Spec.NodeName).To(Equal(env.NodeName("node-"+p.Name[len("db-"):])), utils.Placement(pods))
	}
	return sts
}

func getStatefulSet(ctx SpecContext, namespace, name string) *appsv1.StatefulSet {
	s := &appsv1.StatefulSet{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s)).To(Succeed())
	return s
}

var _ = Describe("StatefulSet rollouts under a migration", Label("operator", "statefulset"), func() {
	It("completes a partitioned rollout, leaving the ordinals below the partition untouched", func(ctx SpecContext) {
		env := newEnv(ctx, "sts-partition")
		statefulSetOnePerNode(ctx, env, 3, func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](2)}}
		})
		_, err := env.AddNode(ctx, "node-3", nil)
		Expect(err).NotTo(HaveOccurred())
		before := incarnations(ctx, env.Namespace, map[string]string{"app": "db"})
		migration(ctx, env.Namespace, "db-apart", pgv1.PlacementMigrationSpec{
			Targets: []pgv1.TargetRef{{Kind: pgv1.KindStatefulSet, Name: "db"}}, Constraint: hostnameApart(nil)})
		Eventually(phaseOf(ctx, env.Namespace, "db-apart")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "db-apart"))
		Expect(conditionOf(ctx, env.Namespace, "db-apart", pgv1.ConditionHardApplied).Message).To(ContainSubstring("partitioned rollout complete"))

		after := incarnations(ctx, env.Namespace, map[string]string{"app": "db"})
		Expect(after["db-0"].UID).To(Equal(before["db-0"].UID), "below the partition")
		Expect(after["db-1"].UID).To(Equal(before["db-1"].UID), "below the partition")
		Expect(after["db-2"].UID).NotTo(Equal(before["db-2"].UID), "at the partition: replaced")
		sts := getStatefulSet(ctx, env.Namespace, "db")
		Expect(sts.Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution).To(HaveLen(1))
	})

	It("waits for each pod of an OnDelete StatefulSet to be deleted before it verifies the stage, naming them", func(ctx SpecContext) {
		env := newEnv(ctx, "sts-ondelete")
		statefulSetOnePerNode(ctx, env, 2, func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
		})
		migration(ctx, env.Namespace, "db-apart", pgv1.PlacementMigrationSpec{
			Targets: []pgv1.TargetRef{{Kind: pgv1.KindStatefulSet, Name: "db"}}, Constraint: hostnameApart(nil), FinalStage: pgv1.StageSoft})
		Eventually(func() string { return conditionOf(ctx, env.Namespace, "db-apart", pgv1.ConditionReady).Message }).Should(
			And(ContainSubstring("uses the OnDelete update strategy: 0 of 2 pods run the new revision"), ContainSubstring("db-0")), explain(ctx, env.Namespace, "db-apart"))
		Expect(getMigration(ctx, env.Namespace, "db-apart").Status.Phase).To(Equal(pgv1.PhaseApplyingSoft))

		By("deleting the pods, as the OnDelete strategy expects")
		for _, name := range []string{"db-1", "db-0"} {
			Expect(k8sClient.Delete(ctx, &corev1.Pod{ObjectMeta: metav1ObjectMeta(env.Namespace, name)})).To(Succeed())
		}
		Eventually(phaseOf(ctx, env.Namespace, "db-apart")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "db-apart"))
	})

	It("names the pod an OrderedReady StatefulSet will not replace during a rollback, and evicts it when allowed", func(ctx SpecContext) {
		env := newEnv(ctx, "sts-stuck")
		statefulSetOnePerNode(ctx, env, 3, func(s *appsv1.StatefulSet) {
			// Each replaced pod must stay Ready this long before the next:
			// the window in which the spec takes db-1's node away.
			s.Spec.MinReadySeconds = 10
		})
		migration(ctx, env.Namespace, "db-apart", pgv1.PlacementMigrationSpec{
			Targets: []pgv1.TargetRef{{Kind: pgv1.KindStatefulSet, Name: "db"}}, Constraint: hostnameApart(nil)})

		By("cordoning db-1's node once the hard stage has replaced db-2")
		Eventually(func(g Gomega) {
			g.Expect(getMigration(ctx, env.Namespace, "db-apart").Status.Phase).To(Equal(pgv1.PhaseApplyingHard))
			sts := getStatefulSet(ctx, env.Namespace, "db")
			pods, err := utils.PodsOf(ctx, k8sClient, env.Namespace, map[string]string{"app": "db"})
			g.Expect(err).NotTo(HaveOccurred())
			replaced := false
			for _, p := range pods {
				if p.Name == "db-2" {
					replaced = p.Labels[appsv1.ControllerRevisionHashLabelKey] == sts.Status.UpdateRevision && utils.Running(p)
				}
			}
			g.Expect(replaced).To(BeTrue(), utils.Placement(pods))
		}).Should(Succeed(), explain(ctx, env.Namespace, "db-apart"))
		Expect(cluster.CordonNode(ctx, env.NodeName("node-1"))).To(Succeed())

		By("rolling back when db-1 stays Pending, and naming it, since the StatefulSet controller will not replace it")
		Eventually(func() string { return conditionOf(ctx, env.Namespace, "db-apart", pgv1.ConditionReady).Reason }).Should(
			Equal(pgv1.ReasonStuckPod), explain(ctx, env.Namespace, "db-apart"))
		Expect(conditionOf(ctx, env.Namespace, "db-apart", pgv1.ConditionReady).Message).To(ContainSubstring("delete pod db-1"))
		Expect(getMigration(ctx, env.Namespace, "db-apart").Status.Phase).To(Equal(pgv1.PhaseRollingBack))
		Expect(conditionOf(ctx, env.Namespace, "db-apart", pgv1.ConditionStalled)).To(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", pgv1.ReasonStuckPod)), "a person must delete the pod: kubectl wait --for=condition=Stalled says so")

		By("the spec allows the eviction, the operator may not evict yet: it names the role")
		pm := getMigration(ctx, env.Namespace, "db-apart")
		patch := client.MergeFrom(pm.DeepCopy())
		pm.Spec.Guards.EvictStuckPods = true
		Expect(k8sClient.Patch(ctx, pm, patch)).To(Succeed())
		Eventually(func() metav1.Condition { return conditionOf(ctx, env.Namespace, "db-apart", pgv1.ConditionStalled) }).Should(And(
			HaveField("Reason", pgv1.ReasonStuckPod), HaveField("Message", ContainSubstring("placement-guard-evict"))), explain(ctx, env.Namespace, "db-apart"))

		By("evicting it once the opt-in evict role is bound")
		Expect(utils.BindEvictRole(ctx, k8sClient, env.Namespace)).To(Succeed())
		Eventually(phaseOf(ctx, env.Namespace, "db-apart"), time.Minute).Should(Equal(pgv1.PhaseRolledBack), explain(ctx, env.Namespace, "db-apart"))
		Expect(conditionOf(ctx, env.Namespace, "db-apart", pgv1.ConditionStalled).Reason).To(Equal(pgv1.ReasonPodsUnschedulable))
		pods := allRunning(ctx, env.Namespace, map[string]string{"app": "db"}, 3)
		sts := getStatefulSet(ctx, env.Namespace, "db")
		Expect(sts.Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution).To(BeEmpty())
		Expect(sts.Status.CurrentRevision).To(Equal(sts.Status.UpdateRevision), utils.Placement(pods))
	})
})

func metav1ObjectMeta(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}
