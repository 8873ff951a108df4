package e2e

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/test/localcluster"
	"github.com/placement-guard/placement-guard/test/utils"
)

// Incident 000: a required anti-affinity between a search engine and a graph
// DB merged while only one data node existed.
var _ = Describe("Incident 000 without placement-guard: anti-affinity merged before the second node", Label("baseline", "incident-000"), func() {
	It("leaves the graph DB Pending and the rollout past its progress deadline", func(ctx SpecContext) {
		env := newEnv(ctx, "i000-baseline")
		dataNode, err := env.AddNode(ctx, "data-1", map[string]string{"role": "data"})
		Expect(err).NotTo(HaveOccurred())

		search := utils.Deployment(env.Namespace, "search", env.Pool(), 1, nil)
		graph := utils.Deployment(env.Namespace, "graphdb", env.Pool(), 1, nil)
		graph.Spec.ProgressDeadlineSeconds = ptr.To[int32](5)
		for _, d := range []*appsv1.Deployment{search, graph} {
			d.Spec.Template.Spec.NodeSelector["role"] = "data"
			Expect(k8sClient.Create(ctx, d)).To(Succeed())
		}
		By("both run on the only data node: the single point of failure")
		Eventually(func(g Gomega) {
			pods, err := utils.PodsOf(ctx, k8sClient, env.Namespace, nil)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods).To(HaveLen(2))
			for _, p := range pods {
				g.Expect(utils.Running(p)).To(BeTrue(), utils.Placement(pods))
				g.Expect(p.Spec.NodeName).To(Equal(dataNode))
			}
		}).Should(Succeed())

		By("the chart upgrade adds required anti-affinity against the search engine")
		updateDeployment(ctx, graph.Namespace, graph.Name, func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Affinity = utils.HostnameAntiAffinity(map[string]string{"app": "search"})
		})

		By("the new graph DB pod has nowhere to go")
		Eventually(func(g Gomega) {
			pods, err := utils.PodsOf(ctx, k8sClient, env.Namespace, map[string]string{"app": "graphdb"})
			g.Expect(err).NotTo(HaveOccurred())
			var pending []corev1.Pod
			for _, p := range pods {
				if ok, msg := utils.Unschedulable(p); ok {
					g.Expect(msg).To(ContainSubstring("didn't match pod anti-affinity rules"))
					pending = append(pending, p)
				}
			}
			g.Expect(pending).To(HaveLen(1), utils.Placement(pods))
		}).Should(Succeed())

		By("and the Deployment reports what helm upgrade failed on: Progress deadline exceeded")
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, utils.ObjectKey(graph), graph)).To(Succeed())
			cond := utils.DeploymentCondition(graph, appsv1.DeploymentProgressing)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(cond.Reason).To(Equal("ProgressDeadlineExceeded"))
		}).Should(Succeed())
	})
})

var _ = Describe("Incident 000 with placement-guard: the graph DB waits for its second data node", Label("operator", "incident-000"), func() {
	It("waits without patching, then applies soft and hard once the node joins, leaving the search engine and broker untouched", func(ctx SpecContext) {
		env := newEnv(ctx, "i000")
		before := seed000(ctx, env)
		migration(ctx, env.Namespace, "graphdb-apart", seed000Spec("", 0))

		By("waiting for capacity, with the graph DB's Deployment untouched")
		Eventually(func() metav1.Condition {
			return conditionOf(ctx, env.Namespace, "graphdb-apart", pgv1.ConditionCapacityAvailable)
		}).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Message", ContainSubstring("1 of 2 qualifying nodes (role=data)"))),
			explain(ctx, env.Namespace, "graphdb-apart"))
		Expect(getMigration(ctx, env.Namespace, "graphdb-apart").Status.Phase).To(Equal(pgv1.PhaseWaitingForCapacity))
		graph := &appsv1.Deployment{}
		Consistently(func() int64 {
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: "graphdb"}, graph)).To(Succeed())
			return graph.Generation
		}).WithTimeout(2 * time.Second).Should(Equal(int64(1)))

		By("kubectl wait, as a pipeline would, keeps waiting")
		bin, err := localcluster.FindBinaries()
		Expect(err).NotTo(HaveOccurred())
		wait := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), "--kubeconfig", cluster.Kubeconfig, "-n", env.Namespace,
			"wait", "--for=condition=Ready", "pmig/graphdb-apart", "--timeout=2m")
		var waitOut bytes.Buffer
		wait.Stdout, wait.Stderr = &waitOut, &waitOut
		Expect(wait.Start()).To(Succeed())
		waited := make(chan error, 1)
		go func() { waited <- wait.Wait() }()
		Consistently(waited).WithTimeout(time.Second).ShouldNot(Receive())

		By("a second data node joins")
		dataNode2, err := env.AddNode(ctx, "data-2", map[string]string{"role": "data"})
		Expect(err).NotTo(HaveOccurred())
		Eventually(phaseOf(ctx, env.Namespace, "graphdb-apart")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "graphdb-apart"))

		Eventually(waited).Should(Receive(BeNil()), func() string { return waitOut.String() })
		Expect(waitOut.String()).To(ContainSubstring("condition met"))

		pm := getMigration(ctx, env.Namespace, "graphdb-apart")
		Expect(pm.Status.Targets).To(HaveLen(1))
		stages := pm.Status.Targets[0].Stages
		Expect(stages).To(HaveLen(2))
		Expect(stages[0].Stage).To(Equal(pgv1.StageSoft))
		Expect(stages[1].Stage).To(Equal(pgv1.StageHard))
		for _, s := range stages {
			Expect(s.CompletedAt).NotTo(BeNil())
		}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: "graphdb"}, graph)).To(Succeed())
		aa := graph.Spec.Template.Spec.Affinity.PodAntiAffinity
		Expect(aa.RequiredDuringSchedulingIgnoredDuringExecution).To(HaveLen(1))
		Expect(aa.PreferredDuringSchedulingIgnoredDuringExecution).To(BeEmpty())

		By("the graph DB runs on the new node; search and broker kept uid, creation time and restarts")
		graphPods := allRunning(ctx, env.Namespace, map[string]string{"app": "graphdb"}, 1)
		Expect(graphPods[0].Spec.NodeName).To(Equal(dataNode2))
		after := incarnations(ctx, env.Namespace, nil)
		for name, inc := range before {
			if inc.Node != "" && (strings.HasPrefix(name, "search-") || strings.HasPrefix(name, "broker-")) {
				Expect(after).To(HaveKeyWithValue(name, inc), name)
			}
		}
	})
})
