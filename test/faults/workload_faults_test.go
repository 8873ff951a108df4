package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/test/faultproxy"
	"github.com/placement-guard/placement-guard/test/localcluster"
	"github.com/placement-guard/placement-guard/test/utils"
)

// operator runs the operator for one spec, behind a fault proxy with rule.
func operator(name string, rule faultproxy.Rule) (*manager, *faultproxy.Proxy) {
	proxy := startProxy()
	proxy.SetRule(rule)
	mgr := newManager(name, managerBinary, proxy.Kubeconfig, managerArgs("--leader-elect=false")...)
	mgr.start()
	DeferCleanup(mgr.stop)
	return mgr, proxy
}

// waitFor waits until the migration's status, current for its spec, has
// the given phase.
func (s *scenario) waitFor(ctx context.Context, phase pgv1.Phase) {
	Eventually(s.phase(ctx)).Should(Equal(phase), s.explain(ctx))
}

// readyReason is the reason of the Ready condition, "" when unknown.
func (s *scenario) readyReason(ctx context.Context) (string, string) {
	pm, err := s.migration(ctx)
	if err != nil {
		return "", ""
	}
	for _, c := range pm.Status.Conditions {
		if c.Type == pgv1.ConditionReady {
			return c.Reason, c.Message
		}
	}
	return "", ""
}

// deploymentWrites counts the operator's committed writes to the
// Deployments of namespace.
func deploymentWrites(p *faultproxy.Proxy, namespace string) int {
	return p.Committed(func(r faultproxy.Request) bool {
		return r.Namespace == namespace && r.Group == "apps" && r.Resource == "deployments"
	})
}

var _ = Describe("F3: 30% of the operator's writes answered 409, 429 or 500", Label("faults", "F3"), func() {
	It("succeeds with one template change per stage, its retries backing off", func(ctx SpecContext) {
		env := newEnv(ctx, "f3")
		var mu sync.Mutex
		random := rand.New(rand.NewPCG(3, 30))
		codes := []int{409, 429, 500}
		failed := 0
		_, proxy := operator("f3", func(req faultproxy.Request) faultproxy.Action {
			mu.Lock()
			defer mu.Unlock()
			if req.Namespace != env.Namespace || !operatorWrite(req) || random.IntN(10) >= 3 {
				return faultproxy.Action{}
			}
			failed++
			return faultproxy.Action{Kind: faultproxy.Fail, Code: codes[random.IntN(len(codes))]}
		})
		s := newScenario(ctx, env, pgv1.KindDeployment, pgv1.StageHard, 3*time.Second)
		mon := s.watch(ctx)
		s.waitFor(ctx, pgv1.PhaseWaitingForCapacity)
		s.addCapacity(ctx)
		start := time.Now()
		s.waitFor(ctx, pgv1.PhaseSucceeded)
		mon.end(ctx, 2)
		mu.Lock()
		AddReportEntry("F3", fmt.Sprintf("%d writes refused, %d committed (%d to the Deployment) in %s", failed, proxy.Stats().Writes, deploymentWrites(proxy, env.Namespace), time.Since(start).Round(time.Second)))
		Expect(failed).To(BeNumerically(">", 0), "the fault was injected")
		mu.Unlock()
		Expect(s.workload(ctx).GetGeneration()-s.generation).To(Equal(int64(2)), "no stage written twice")
	})
})

var _ = Describe("F5: the node of a freshly rolled pod deleted during the hard stage", Label("faults", "F5"), func() {
	It("ends with the pod placed again or the stage rolled back, nothing left Pending", func(ctx SpecContext) {
		env := newEnv(ctx, "f5")
		operator("f5", nil)
		s := newScenario(ctx, env, pgv1.KindDeployment, pgv1.StageHard, 3*time.Second)
		// kwok makes pods Ready at once: a stage's rollout of two pods can
		// be over between two looks. A new pod counts as available only
		// after a few seconds here, so the hard stage lasts long enough to
		// lose the node of one of its fresh pods.
		d := s.workload(ctx).(*appsv1.Deployment)
		slow := client.MergeFrom(d.DeepCopy())
		d.Spec.MinReadySeconds = 3
		Expect(k8sClient.Patch(ctx, d, slow)).To(Succeed())
		s.generation = d.GetGeneration() // I5 counts the operator's writes from here
		mon := s.watch(ctx)
		s.waitFor(ctx, pgv1.PhaseWaitingForCapacity)
		s.addCapacity(ctx)
		var node string
		Eventually(func(g Gomega) {
			pm, err := s.migration(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pm.Status.Operation).NotTo(BeNil())
			g.Expect(pm.Status.Operation.Held()).To(BeFalse(), "the Hard stage's intent is held through the soak; its write is due once it ends")
			g.Expect(pm.Status.Operation.Stage).To(Equal(pgv1.StageHard))
			for _, p := range s.webPods(ctx) {
				if n, st := s.ours(&p.Spec); n == 1 && st == pgv1.StageHard && p.Spec.NodeName != "" {
					node = p.Spec.NodeName
				}
			}
			g.Expect(node).NotTo(BeEmpty())
		}).Should(Succeed(), s.explain(ctx))
		Expect(cluster.RemoveNode(ctx, node)).To(Succeed())
		Eventually(s.phase(ctx)).Should(BeElementOf(pgv1.PhaseSucceeded, pgv1.PhaseRolledBack), s.explain(ctx))
		Eventually(func() []string {
			var pending []string
			for _, p := range s.webPods(ctx) {
				if p.Spec.NodeName == "" {
					pending = append(pending, p.Name)
				}
			}
			return pending
		}).Should(BeEmpty())
		mon.end(ctx, 2)
	})
})

var _ = Describe("F6: the target deleted mid-soak, then created again", Label("faults", "F6"), func() {
	It("is Blocked TargetNotFound without an error loop, and starts over for the new workload", func(ctx SpecContext) {
		env := newEnv(ctx, "f6")
		mgr, proxy := operator("f6", nil)
		s := newScenario(ctx, env, pgv1.KindDeployment, pgv1.StageHard, 20*time.Second)
		s.waitFor(ctx, pgv1.PhaseWaitingForCapacity)
		s.addCapacity(ctx)
		s.waitFor(ctx, pgv1.PhaseSoaking)
		recreated := s.workload(ctx).(*appsv1.Deployment).DeepCopy()

		By("deleting the Deployment")
		Expect(k8sClient.Delete(ctx, s.workload(ctx))).To(Succeed())
		s.waitFor(ctx, pgv1.PhaseBlocked)
		reason, _ := s.readyReason(ctx)
		Expect(reason).To(Equal(pgv1.ReasonTargetNotFound))
		// The garbage collector removes the ReplicaSets and pods after the
		// Deployment, and the status records their going: only once they
		// are gone can the writes settle for good.
		Eventually(func(g Gomega) {
			var rs appsv1.ReplicaSetList
			g.Expect(k8sClient.List(ctx, &rs, client.InNamespace(env.Namespace), client.MatchingLabels{"app": "web"})).To(Succeed())
			g.Expect(rs.Items).To(BeEmpty())
			pods, err := utils.PodsOf(ctx, k8sClient, env.Namespace, map[string]string{"app": "web"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods).To(BeEmpty())
		}).Should(Succeed(), "the Deployment's ReplicaSets and pods are collected")
		reconcileErrors := func() int { return errorsIn(mgr.log(1<<20), env.Namespace) }
		errors := reconcileErrors()
		// The writes settle (a last Event or status record may trail the
		// phase), then stop: a loop never settles.
		writesNow := writesIn(proxy, env.Namespace)
		Eventually(func(g Gomega) {
			w := len(writesNow())
			g.Consistently(func() int { return len(writesNow()) }, "3s").Should(Equal(w))
		}, "30s").Should(Succeed(), "the writes settle")
		writes := len(writesNow())
		Consistently(func() int { return len(writesNow()) }, "10s").Should(Equal(writes), func() string {
			return fmt.Sprintf("no write loop; written since: %v\nthe manager's log:\n%s", writesNow()[writes:], mgr.log(16<<10))
		})
		Expect(reconcileErrors()).To(BeNumerically("<=", errors+2), "no error loop")

		By("creating it again")
		recreated.ResourceVersion, recreated.UID, recreated.ManagedFields = "", "", nil
		recreated.Spec.Template.Spec.Affinity = nil
		recreated.Status = appsv1.DeploymentStatus{}
		Expect(k8sClient.Create(ctx, recreated)).To(Succeed())
		Eventually(func() pgv1.Stage {
			_, st := s.ours(templateOf(s.workload(ctx)))
			return st
		}).Should(Equal(pgv1.StageSoft), "the new workload starts at the soft stage")
		s.generation = 1
		s.waitFor(ctx, pgv1.PhaseSucceeded)
		Expect(s.workload(ctx).GetGeneration()).To(Equal(int64(3)))
	})
})

var _ = Describe("F7: a GitOps controller replaces the template without the constraint every 5 s", Label("faults", "F7"), func() {
	It("names it, writes the constraint again a bounded number of times, then stalls, within the write budget", func(ctx SpecContext) {
		env := newEnv(ctx, "f7")
		_, proxy := operator("f7", nil)
		s := newScenario(ctx, env, pgv1.KindDeployment, pgv1.StageSoft, 2*time.Second)
		mon := s.watch(ctx)
		s.waitFor(ctx, pgv1.PhaseWaitingForCapacity)
		s.addCapacity(ctx)
		s.waitFor(ctx, pgv1.PhaseSucceeded)
		mon.end(ctx, 1)
		before := deploymentWrites(proxy, env.Namespace)

		By("replacing the template as a GitOps sync would, every 5 s")
		sync, stop := context.WithCancel(ctx)
		defer stop()
		go func() {
			defer GinkgoRecover()
			for sync.Err() == nil {
				// A replace sync (Argo CD's Replace=true): the manifest
				// without the constraint, and the tool's tracking annotation.
				d := s.workload(sync).(*appsv1.Deployment)
				d.Spec.Template.Spec.Affinity = nil
				d.Annotations = map[string]string{"argocd.argoproj.io/tracking-id": "f7:apps/Deployment:" + env.Namespace + "/web", "synced-at": time.Now().Format(time.RFC3339Nano)}
				_ = k8sClient.Update(sync, d, client.FieldOwner("argocd-controller"))
				select {
				case <-sync.Done():
				case <-time.After(5 * time.Second):
				}
			}
		}()
		Eventually(func() string {
			_, msg := s.readyReason(ctx)
			return msg + conditionMessage(ctx, s, pgv1.ConditionConstraintInSync)
		}).Should(
			ContainSubstring(`field manager "argocd-controller"`))
		s.waitFor(ctx, pgv1.PhaseFailed)
		reason, _ := s.readyReason(ctx)
		Expect(reason).To(Equal(pgv1.ReasonDriftRetriesExceeded))
		stop()
		rewrites := deploymentWrites(proxy, env.Namespace) - before
		AddReportEntry("F7", fmt.Sprintf("%d re-writes before stalling", rewrites))
		Expect(rewrites).To(BeNumerically("<=", 3), "three corrections, no more")
		Expect(deploymentWrites(proxy, env.Namespace)).To(BeNumerically("<=", 6), "the write budget is never reached")
	})
})

var _ = Describe("F8: another field manager owns the anti-affinity terms before the soft stage", Label("faults", "F8"), func() {
	It("is Blocked naming it, and writes nothing", func(ctx SpecContext) {
		env := newEnv(ctx, "f8")
		_, proxy := operator("f8", nil)
		s := newScenario(ctx, env, pgv1.KindDeployment, pgv1.StageHard, 2*time.Second)
		By("a chart applying its own preferred anti-affinity term")
		// An update of the whole object, read again when the Deployment
		// controller wrote its status in between.
		Eventually(func() error {
			d := s.workload(ctx).(*appsv1.Deployment)
			d.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 10, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "broker"}}}}}}}
			return k8sClient.Update(ctx, d, client.FieldOwner("helm"))
		}).Should(Succeed())
		generation := s.workload(ctx).GetGeneration()
		s.addCapacity(ctx)
		s.waitFor(ctx, pgv1.PhaseBlocked)
		// The chart's own rollout may still be replacing pods: the
		// migration then waits for its view of them before it says again
		// who owns the terms.
		Eventually(func(g Gomega) {
			reason, msg := s.readyReason(ctx)
			g.Expect(reason).To(BeElementOf(placement.HazardAffinityClobber, pgv1.ReasonFieldConflict))
			g.Expect(msg).To(ContainSubstring(`"helm"`))
		}).WithTimeout(time.Minute).Should(Succeed())
		Consistently(func() int64 { return s.workload(ctx).GetGeneration() }, "5s").Should(Equal(generation))
		Expect(deploymentWrites(proxy, env.Namespace)).To(BeZero())
	})
})

var _ = Describe("F9: the constraint edited during the hard stage", Label("faults", "F9"), func() {
	It("finishes the stage in flight as recorded, then starts over with the new constraint", func(ctx SpecContext) {
		env := newEnv(ctx, "f9")
		operator("f9", nil)
		s := newScenario(ctx, env, pgv1.KindDeployment, pgv1.StageHard, 10*time.Second)
		mon := s.watch(ctx)
		s.waitFor(ctx, pgv1.PhaseWaitingForCapacity)
		s.addCapacity(ctx)
		// The hard stage's rollout takes a second or two on kwok: too short
		// a window to edit the spec in reliably. While the soft stage soaks,
		// the controller manager is frozen, so the hard stage, once
		// written, stays in flight until it thaws.
		s.waitFor(ctx, pgv1.PhaseSoaking)
		Expect(cluster.HangComponent(localcluster.KubeControllerManager)).To(Succeed())
		thawed := false
		thaw := func() {
			if !thawed {
				thawed = true
				Expect(cluster.ResumeComponent(localcluster.KubeControllerManager)).To(Succeed())
			}
		}
		DeferCleanup(thaw)
		Eventually(func(g Gomega) {
			pm, err := s.migration(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pm.Status.Operation).NotTo(BeNil())
			g.Expect(pm.Status.Operation.Held()).To(BeFalse(), "the Hard stage's intent is held through the soak; its write is due once it ends")
			g.Expect(pm.Status.Operation.Stage).To(Equal(pgv1.StageHard))
		}).Should(Succeed(), s.explain(ctx))
		pm, err := s.migration(ctx)
		Expect(err).NotTo(HaveOccurred())
		patch := client.MergeFrom(pm.DeepCopy())
		pm.Spec.Constraint = pgv1.Constraint{TopologySpread: &pgv1.TopologySpreadConstraint{TopologyKey: corev1.LabelHostname, MaxSkew: 1}}
		Expect(k8sClient.Patch(ctx, pm, patch)).To(Succeed())
		thaw()

		Eventually(func() string { return conditionReason(ctx, s, pgv1.ConditionHardApplied) }).Should(Equal(pgv1.ReasonStageVerified), "the hard stage in flight is verified")
		mon.stop()
		s.waitFor(ctx, pgv1.PhaseSucceeded)
		spec := templateOf(s.workload(ctx))
		n, _ := s.ours(spec)
		Expect(n).To(BeZero(), "the old entry is gone")
		Expect(spec.TopologySpreadConstraints).To(HaveLen(1))
		Expect(spec.TopologySpreadConstraints[0].WhenUnsatisfiable).To(Equal(corev1.DoNotSchedule))
		Expect(s.workload(ctx).GetGeneration()-s.generation).To(Equal(int64(4)), "two stages of each constraint")
	})
})

var _ = Describe("F10: the migration deleted while soaking", Label("faults", "F10"), func() {
	DescribeTable("reverts or keeps the constraint as onDelete says, and lets the migration go",
		func(ctx SpecContext, policy pgv1.DeletionPolicy, stopOperatorFirst bool) {
			env := newEnv(ctx, "f10")
			mgr, _ := operator("f10", nil)
			s := newScenario(ctx, env, pgv1.KindDeployment, pgv1.StageHard, time.Minute)
			pm, err := s.migration(ctx)
			Expect(err).NotTo(HaveOccurred())
			patch := client.MergeFrom(pm.DeepCopy())
			pm.Spec.OnDelete = policy
			Expect(k8sClient.Patch(ctx, pm, patch)).To(Succeed())
			s.waitFor(ctx, pgv1.PhaseWaitingForCapacity)
			s.addCapacity(ctx)
			s.waitFor(ctx, pgv1.PhaseSoaking)

			if stopOperatorFirst {
				By("uninstalling in the wrong order: the operator first")
				mgr.kill()
			}
			Expect(k8sClient.Delete(ctx, pm)).To(Succeed())
			if stopOperatorFirst {
				Consistently(func() error { _, err := s.migration(ctx); return err }, "3s").Should(Succeed(), "the finalizer waits for the operator")
				mgr.start()
			}
			Eventually(func() bool { _, err := s.migration(ctx); return err != nil }).Should(BeTrue(), "the migration is gone")
			n, _ := s.ours(templateOf(s.workload(ctx)))
			if policy == pgv1.DeletionRevert {
				Expect(n).To(BeZero(), "reverted to what the workload had before")
				Expect(templateOf(s.workload(ctx)).Affinity).To(Equal(s.template.Affinity))
			} else {
				Expect(n).To(Equal(1), "the soft stage stays")
			}
		},
		Entry("Revert", pgv1.DeletionRevert, false),
		Entry("Retain", pgv1.DeletionRetain, false),
		Entry("Revert, the operator stopped before the deletion and started again", pgv1.DeletionRevert, true),
	)
})

// condition is the migration's condition of type t, empty when it has none.
func condition(ctx context.Context, s *scenario, t string) metav1.Condition {
	pm, err := s.migration(ctx)
	if err != nil {
		return metav1.Condition{}
	}
	if c := meta.FindStatusCondition(pm.Status.Conditions, t); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func conditionMessage(ctx context.Context, s *scenario, t string) string {
	return condition(ctx, s, t).Message
}

func conditionReason(ctx context.Context, s *scenario, t string) string {
	return condition(ctx, s, t).Reason
}

// webPods are web's live pods.
func (s *scenario) webPods(ctx context.Context) []corev1.Pod {
	var list corev1.PodList
	Expect(k8sClient.List(ctx, &list, client.InNamespace(s.env.Namespace), client.MatchingLabels{"app": "web"})).To(Succeed())
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}
