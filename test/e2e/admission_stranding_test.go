package e2e

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/test/utils"
)

// hardWeb is seed 001's web carrying its hard anti-affinity with a
// rollout that fits (maxUnavailable 1), as a workload looks once the
// constraint has landed safely.
func hardWeb(ctx SpecContext, env *utils.Env) {
	seed001(ctx, env)
	updateDeployment(ctx, env.Namespace, "web", func(web *appsv1.Deployment) {
		web.Spec.Template.Spec.Affinity = utils.HostnameAntiAffinity(map[string]string{"app": "web"})
		web.Spec.Strategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(1))
	})
	Eventually(func() bool { return utils.RolledOut(getDeployment(ctx, env.Namespace, "web")) }).Should(BeTrue())
}

// autoscale writes a Deployment's scale subresource as a
// HorizontalPodAutoscaler does, as its ServiceAccount, and returns the
// warnings of the answer.
func autoscale(ctx SpecContext, namespace, name string, replicas int32) []string {
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:kube-system:horizontal-pod-autoscaler"}
	var warnings warningsOf
	cfg.WarningHandler = &warnings
	hpa, err := client.New(cfg, client.Options{Scheme: k8sClient.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	scale := &autoscalingv1.Scale{}
	Expect(hpa.SubResource("scale").Get(ctx, d, scale)).To(Succeed())
	scale.Spec.Replicas = replicas
	Expect(hpa.SubResource("scale").Update(ctx, d, client.WithSubResourceBody(scale))).To(Succeed(), "an autoscaler's scale is never refused")
	return warnings.said
}

// warningsOf keeps the warnings of a client's answers.
type warningsOf struct{ said []string }

func (w *warningsOf) HandleWarningHeader(_ int, _ string, text string) { w.said = append(w.said, text) }

var _ = Describe("The admission check of changes that strand pods without touching the constraint", Label("operator", "admission"), func() {
	It("refuses in Deny a hard-constrained workload moved to a pool without its nodes, and warns of it in Warn", func(ctx SpecContext) {
		env := newEnv(ctx, "strand-pool")
		hardWeb(ctx, env)
		labelNamespace(ctx, env.Namespace, "Deny")

		moved := getDeployment(ctx, env.Namespace, "web")
		moved.APIVersion, moved.Kind = "apps/v1", "Deployment"
		moved.Spec.Template.Spec.NodeSelector = map[string]string{utils.PoolLabel: env.Pool() + "-elsewhere"}
		Eventually(func(g Gomega) {
			_, errOut, code := kubectlApply(ctx, env.Namespace, nil, moved.DeepCopy())
			g.Expect(code).NotTo(Equal(0))
			g.Expect(errOut).To(And(ContainSubstring("denied the request"), ContainSubstring("InsufficientCapacity"), ContainSubstring("have 0 of 2 qualifying nodes")))
		}).Should(Succeed())
		Expect(getDeployment(ctx, env.Namespace, "web").Spec.Template.Spec.NodeSelector).To(HaveKeyWithValue(utils.PoolLabel, env.Pool()), "nothing was written")

		By("requests past what the nodes hold are judged too")
		big := getDeployment(ctx, env.Namespace, "web")
		big.APIVersion, big.Kind = "apps/v1", "Deployment"
		big.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("64")
		_, errOut, code := kubectlApply(ctx, env.Namespace, []string{"--dry-run=server"}, big)
		Expect(code).NotTo(Equal(0), "requests no node holds")
		Expect(errOut).To(ContainSubstring("denied the request"))

		By("in Warn the move is admitted, with the warning")
		labelNamespace(ctx, env.Namespace, "Warn")
		Eventually(func(g Gomega) {
			_, errOut, code := kubectlApply(ctx, env.Namespace, []string{"--dry-run=server"}, moved.DeepCopy())
			g.Expect(code).To(Equal(0), errOut)
			g.Expect(errOut).To(And(ContainSubstring("Warning:"), ContainSubstring("have 0 of 2 qualifying nodes")))
		}).Should(Succeed())
	})

	It("judges kubectl scale: warns in Warn, refuses in Deny a person's scale that leaves replicas unplaceable, and admits an autoscaler's", func(ctx SpecContext) {
		env := newEnv(ctx, "strand-scale")
		hardWeb(ctx, env)
		labelNamespace(ctx, env.Namespace, "Warn")
		Eventually(func(g Gomega) {
			out, err := kubectl(ctx, "-n", env.Namespace, "scale", "deployment/web", "--replicas=5", "--dry-run=server")
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(And(ContainSubstring("Warning:"), ContainSubstring("Deployment/web"), ContainSubstring("InsufficientCapacity")))
		}).Should(Succeed())
		labelNamespace(ctx, env.Namespace, "Deny")
		Eventually(func(g Gomega) {
			out, err := kubectl(ctx, "-n", env.Namespace, "scale", "deployment/web", "--replicas=5")
			g.Expect(err).To(HaveOccurred(), out)
			g.Expect(out).To(And(ContainSubstring("denied the request"), ContainSubstring("InsufficientCapacity")))
		}).Should(Succeed())
		Expect(getDeployment(ctx, env.Namespace, "web").Spec.Replicas).To(Equal(ptr.To[int32](2)), "nothing was written")

		By("the HorizontalPodAutoscaler's own writes, as its ServiceAccount makes them, are warned, never refused")
		Expect(autoscale(ctx, env.Namespace, "web", 3)).To(ContainElement(ContainSubstring("InsufficientCapacity")))
		Expect(getDeployment(ctx, env.Namespace, "web").Spec.Replicas).To(Equal(ptr.To[int32](3)))
		By("the finding is an Event on the Deployment once the scale lands")
		Expect(eventNotes(ctx, env.Namespace, "web", "InsufficientCapacity")).To(ContainElement(ContainSubstring("qualifying nodes")))
	})

	It("refuses in Deny a move to a smaller pool after a scale that no pod followed, and the scale itself from a person", func(ctx SpecContext) {
		env := newEnv(ctx, "strand-walk")
		for _, n := range []struct{ name, tier string }{{"a1", "a"}, {"a2", "a"}, {"a3", "a"}, {"b1", "b"}, {"b2", "b"}} {
			_, err := env.AddNode(ctx, n.name, map[string]string{"tier": n.tier})
			Expect(err).NotTo(HaveOccurred())
		}
		// A pod quota of three: a scale past it creates no pod, so the
		// workload's pods stay where they are while its spec says 50.
		Expect(k8sClient.Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: "pods"},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("3")}}})).To(Succeed())
		rates := utils.Deployment(env.Namespace, "rates", env.Pool(), 3, nil)
		rates.Spec.Template.Spec.NodeSelector["tier"] = "a"
		rates.Spec.Template.Spec.Affinity = utils.HostnameAntiAffinity(map[string]string{"app": "rates"})
		rates.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
		Expect(k8sClient.Create(ctx, rates)).To(Succeed())
		allRunning(ctx, env.Namespace, map[string]string{"app": "rates"}, 3)
		labelNamespace(ctx, env.Namespace, "Deny")
		// Read again when the Deployment controller wrote the status in
		// between: the answer wanted is the check's, not a conflict.
		toPoolB := func() error {
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				d := getDeployment(ctx, env.Namespace, "rates")
				d.Spec.Template.Spec.NodeSelector["tier"] = "b"
				return k8sClient.Update(ctx, d, client.DryRunAll)
			})
		}
		Eventually(func(g Gomega) {
			err := toPoolB()
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring("InsufficientCapacity"))
		}).Should(Succeed(), "three apart moved to two nodes")

		By("a person's scale to 50 is refused; an autoscaler's goes through, and no pod follows it")
		out, err := kubectl(ctx, "-n", env.Namespace, "scale", "deployment/rates", "--replicas=50")
		Expect(err).To(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("denied the request"))
		autoscale(ctx, env.Namespace, "rates", 50)
		Eventually(func() int32 { return ptr.Deref(getDeployment(ctx, env.Namespace, "rates").Spec.Replicas, 0) }).Should(Equal(int32(50)))

		By("the same move is still refused: fewer of its replicas fit on pool b than on pool a")
		err = toPoolB()
		Expect(err).To(HaveOccurred(), "the move after the scale was admitted")
		Expect(err.Error()).To(ContainSubstring("InsufficientCapacity"))
		Expect(err.Error()).NotTo(ContainSubstring("no worse"))
		Expect(getDeployment(ctx, env.Namespace, "rates").Spec.Template.Spec.NodeSelector).To(HaveKeyWithValue("tier", "a"))

		By("the way back, three replicas on pool a, goes through")
		out, err = kubectl(ctx, "-n", env.Namespace, "scale", "deployment/rates", "--replicas=3")
		Expect(err).NotTo(HaveOccurred(), out)
	})

	It("refuses in Deny a required anti-affinity term aimed at another namespace's pods that leaves them no node to replace a pod on", func(ctx SpecContext) {
		env := newEnv(ctx, "strand-other")
		for _, n := range []string{"n1", "n2", "n3", "n4"} {
			_, err := env.AddNode(ctx, n, nil)
			Expect(err).NotTo(HaveOccurred())
		}
		// Another team's namespace: a database of three pods kept apart,
		// on three of the pool's four nodes.
		payments := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: env.Namespace + "-payments"}}
		Expect(k8sClient.Create(ctx, payments)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, payments))).To(Succeed()) })
		dbLabels := map[string]string{"app": "db-" + env.Namespace}
		db := utils.Deployment(payments.Name, "db", env.Pool(), 3, nil)
		db.Spec.Selector.MatchLabels, db.Spec.Template.Labels = dbLabels, dbLabels
		db.Spec.Template.Spec.Affinity = utils.HostnameAntiAffinity(dbLabels)
		Expect(k8sClient.Create(ctx, db)).To(Succeed())
		allRunning(ctx, payments.Name, dbLabels, 3)
		labelNamespace(ctx, env.Namespace, "Deny")

		By("a tenant's Deployment kept apart from every namespace's database pods takes the fourth node")
		spoiler := utils.Deployment(env.Namespace, "spoiler", env.Pool(), 1, nil)
		spoiler.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: dbLabels}, NamespaceSelector: &metav1.LabelSelector{}}}}}
		Eventually(func(g Gomega) {
			err := k8sClient.Create(ctx, spoiler.DeepCopy(), client.DryRunAll)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(And(ContainSubstring("StrandsOthers"), ContainSubstring(payments.Name+"/db-")))
		}).Should(Succeed())

		By("kept to its own namespace, the same term is admitted")
		spoiler.Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].NamespaceSelector = nil
		Expect(k8sClient.Create(ctx, spoiler.DeepCopy(), client.DryRunAll)).To(Succeed())
	})

	It("admits in Deny the rollback of a workload that is already unsatisfiable, with a warning", func(ctx SpecContext) {
		env := newEnv(ctx, "strand-rollback")
		hardWeb(ctx, env)

		By("a release raised web to 3 replicas on 2 nodes with a rollout that deadlocks, before Deny was on")
		updateDeployment(ctx, env.Namespace, "web", func(bad *appsv1.Deployment) {
			bad.Spec.Replicas = ptr.To[int32](3)
			bad.Spec.Strategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(0))
		})
		labelNamespace(ctx, env.Namespace, "Deny")

		By("the rollback to 2 replicas, still a rollout that deadlocks, leaves it no worse and goes through")
		back := getDeployment(ctx, env.Namespace, "web")
		back.APIVersion, back.Kind = "apps/v1", "Deployment"
		back.Spec.Replicas = ptr.To[int32](2)
		back.ResourceVersion, back.ManagedFields = "", nil // applied as a release would, without a precondition
		Eventually(func(g Gomega) {
			_, errOut, code := kubectlApply(ctx, env.Namespace, []string{"--dry-run=server"}, back.DeepCopy())
			g.Expect(code).To(Equal(0), errOut)
			g.Expect(errOut).To(And(ContainSubstring("RolloutDeadlock"), ContainSubstring("admitted in Deny: the workload was already so")))
		}).Should(Succeed())
		_, errOut, code := kubectlApply(ctx, env.Namespace, nil, back.DeepCopy())
		Expect(code).To(Equal(0), errOut)
		Expect(getDeployment(ctx, env.Namespace, "web").Spec.Replicas).To(Equal(ptr.To[int32](2)))

		By("raising it again is refused: that adds to it")
		Eventually(func(g Gomega) {
			again := getDeployment(ctx, env.Namespace, "web")
			again.Spec.Replicas = ptr.To[int32](3)
			err := k8sClient.Update(ctx, again, client.DryRunAll)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring("InsufficientCapacity"))
		}).Should(Succeed())
	})
})
