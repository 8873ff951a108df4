package faults

import (
	"bytes"
	"context"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/plugin"
	"github.com/placement-guard/placement-guard/test/utils"
)

// abort runs `kubectl placement abort` in-process against the cluster.
func abort(s *scenario, args ...string) (string, int) {
	var out bytes.Buffer
	all := append([]string{"abort", "-n", s.env.Namespace, s.name, "--yes", "--kubeconfig", cluster.Kubeconfig}, args...)
	code := plugin.Main(all, genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	return out.String(), code
}

// gone waits until the scenario's migration is deleted.
func (s *scenario) gone(ctx context.Context) {
	Eventually(func() bool {
		_, err := s.migration(ctx)
		return apierrors.IsNotFound(err)
	}).WithTimeout(2*time.Minute).Should(BeTrue(), s.explain(ctx))
}

var _ = Describe("F13: kubectl placement abort at each phase of a Retain migration", Label("faults", "F13"), func() {
	DescribeTable("removes what the migration wrote every time, and the migration goes",
		func(ctx SpecContext, at pgv1.Phase, killAfterDelete bool) {
			env := newEnv(ctx, "f13")
			mgr, _ := operator("f13", nil)
			soak := 2 * time.Second
			if at == pgv1.PhaseSoaking {
				soak = time.Minute
			}
			s := newScenario(ctx, env, pgv1.KindDeployment, pgv1.StageHard, soak)
			s.waitFor(ctx, pgv1.PhaseWaitingForCapacity)
			if at != pgv1.PhaseWaitingForCapacity {
				s.addCapacity(ctx)
			}
			s.waitFor(ctx, at)
			pm, err := s.migration(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(pm.Spec.OnDelete).To(Equal(pgv1.DeletionRetain))

			if killAfterDelete {
				out, code := abort(s, "--wait=false")
				Expect(code).To(Equal(plugin.ExitOK), out)
				mgr.kill()
				Consistently(func() error { _, err := s.migration(ctx); return err }, "2s").Should(Succeed(), "the revert finalizer holds it")
				mgr.start()
			} else {
				out, code := abort(s, "--timeout", "2m")
				Expect(code).To(Equal(plugin.ExitOK), out)
				Expect(out).To(ContainSubstring("deleted after its revert"))
			}
			s.gone(ctx)
			spec := templateOf(s.workload(ctx))
			n, _ := s.ours(spec)
			Expect(n).To(BeZero(), "nothing of the migration is left in the template")
			Expect(spec.Affinity).To(Equal(s.template.Affinity), "the template's anti-affinity is what it was before")
			if at == pgv1.PhaseWaitingForCapacity {
				Expect(s.workload(ctx).GetGeneration()).To(Equal(s.generation), "nothing was written, so nothing is reverted")
			}
		},
		Entry("waiting for capacity", pgv1.PhaseWaitingForCapacity, false),
		Entry("soaking the soft stage", pgv1.PhaseSoaking, false),
		Entry("succeeded at the hard stage", pgv1.PhaseSucceeded, false),
		Entry("soaking, the operator killed right after the delete", pgv1.PhaseSoaking, true),
	)
})

var _ = Describe("F14: a Revert migration deleted after its target was deleted and created again, the operator down meanwhile", Label("faults", "F14"), func() {
	It("lets the migration go and never writes the new workload", func(ctx SpecContext) {
		env := newEnv(ctx, "f14")
		mgr, proxy := operator("f14", nil)
		s := newScenario(ctx, env, pgv1.KindDeployment, pgv1.StageHard, time.Minute)
		pm, err := s.migration(ctx)
		Expect(err).NotTo(HaveOccurred())
		patch := client.MergeFrom(pm.DeepCopy())
		pm.Spec.OnDelete = pgv1.DeletionRevert
		Expect(k8sClient.Patch(ctx, pm, patch)).To(Succeed())
		s.waitFor(ctx, pgv1.PhaseWaitingForCapacity)
		s.addCapacity(ctx)
		s.waitFor(ctx, pgv1.PhaseSoaking)

		By("with the operator down, web is deleted and created again, and the migration deleted")
		mgr.kill()
		old := s.workload(ctx)
		Expect(k8sClient.Delete(ctx, old)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(old), &appsv1.Deployment{}))
		}).Should(BeTrue())
		fresh := utils.Deployment(env.Namespace, "web", env.Pool(), 2, nil)
		fresh.Spec.Template.Spec.NodeSelector["role"] = dataRole
		Expect(k8sClient.Create(ctx, fresh)).To(Succeed())
		pm, err = s.migration(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(k8sClient.Delete(ctx, pm)).To(Succeed())
		before := deploymentWrites(proxy, env.Namespace)

		mgr.start()
		s.gone(ctx)
		now := s.workload(ctx)
		Expect(now.GetUID()).To(Equal(fresh.UID))
		Expect(now.GetGeneration()).To(Equal(int64(1)), "the new web is never written")
		Expect(deploymentWrites(proxy, env.Namespace)).To(Equal(before), "no write to any Deployment after the restart")
	})
})

var _ = Describe("F15: a capacity request the operator may not make, then may not remove", Label("faults", "F15"), func() {
	It("says so in CapacityRequested while the migration goes on, and makes and removes it once allowed", func(ctx SpecContext) {
		installPlaceholderPriorityClass(ctx)
		env := newEnv(ctx, "f15")
		operator("f15", nil)
		s := newScenario(ctx, env, pgv1.KindDeployment, pgv1.StageHard, 2*time.Second)
		s.waitFor(ctx, pgv1.PhaseWaitingForCapacity)
		pm, err := s.migration(ctx)
		Expect(err).NotTo(HaveOccurred())
		patch := client.MergeFrom(pm.DeepCopy())
		pm.Spec.Capacity.Provision = &pgv1.Provision{Mode: pgv1.ProvisionPlaceholderPods, MaxNodes: ptr.To[int32](1)}
		Expect(k8sClient.Patch(ctx, pm, patch)).To(Succeed())
		placeholders := func() bool {
			err := k8sClient.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: "web-apart-capacity"}, &appsv1.Deployment{})
			return err == nil
		}

		By("without the placeholder role: refused, named, nothing created")
		Eventually(func() metav1.Condition { return condition(ctx, s, pgv1.ConditionCapacityRequested) }).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", pgv1.ReasonRequestFailed),
			HaveField("Message", ContainSubstring("placement-guard-placeholders"))), s.explain(ctx))
		Expect(placeholders()).To(BeFalse())

		By("the role bound: the request is made")
		Expect(utils.BindPlaceholderRole(ctx, k8sClient, env.Namespace)).To(Succeed())
		Eventually(placeholders).WithTimeout(time.Minute).Should(BeTrue(), s.explain(ctx))
		Eventually(func() string { return conditionReason(ctx, s, pgv1.ConditionCapacityRequested) }).Should(Equal(pgv1.ReasonCapacityRequested))

		By("the role unbound again, then the node arrives: the stages go on, and the request that cannot be removed is named")
		Expect(k8sClient.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: "placement-guard-placeholders"}})).To(Succeed())
		s.addCapacity(ctx)
		Eventually(func(g Gomega) {
			pm, err := s.migration(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pm.Status.Phase).NotTo(Equal(pgv1.PhaseWaitingForCapacity))
			c := condition(ctx, s, pgv1.ConditionCapacityRequested)
			g.Expect(c.Reason).To(Equal(pgv1.ReasonRequestRemovalFailed))
			g.Expect(c.Message).To(ContainSubstring("forbidden"))
		}).WithTimeout(time.Minute).Should(Succeed(), s.explain(ctx))
		s.waitFor(ctx, pgv1.PhaseSucceeded)
		Expect(placeholders()).To(BeTrue(), "not removed without the right to")

		By("bound again: the request goes, and its record and condition with it")
		Expect(utils.BindPlaceholderRole(ctx, k8sClient, env.Namespace)).To(Succeed())
		Eventually(placeholders).WithTimeout(time.Minute).Should(BeFalse(), s.explain(ctx))
		Eventually(func() string { return condition(ctx, s, pgv1.ConditionCapacityRequested).Type }).Should(BeEmpty())
		Expect(conditionReason(ctx, s, pgv1.ConditionReady)).To(Equal(pgv1.ReasonSucceeded))
	})
})
