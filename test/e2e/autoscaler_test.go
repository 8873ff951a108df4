package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/test/localcluster"
	"github.com/placement-guard/placement-guard/test/utils"
)

var (
	karpenterOnce sync.Once
	karpenterErr  error
	nodePoolGVK   = schema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodePool"}
	bufferGVK     = schema.GroupVersionKind{Group: "autoscaling.x-k8s.io", Version: "v1beta1", Kind: "CapacityBuffer"}
)

// startKarpenter runs Karpenter's kwok provider against the suite's cluster,
// once, and installs the placeholder PriorityClass that config/ ships.
func startKarpenter(ctx context.Context) {
	karpenterOnce.Do(func() {
		karpenterErr = cluster.StartKarpenter(ctx)
	})
	Expect(karpenterErr).NotTo(HaveOccurred())
	installPlaceholderPriorityClass(ctx)
}

// installPlaceholderPriorityClass creates the PriorityClass config/ ships
// for placeholder pods, under config/default's name prefix.
func installPlaceholderPriorityClass(ctx context.Context) {
	pc := &schedulingv1.PriorityClass{}
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "manager", "priorityclass.yaml"))
	Expect(err).NotTo(HaveOccurred())
	Expect(sigsyaml.Unmarshal(data, pc)).To(Succeed())
	pc.Name = "placement-guard-" + pc.Name // config/default's namePrefix
	Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, pc))).To(Succeed())
}

// dataNodePool makes Karpenter launch role=data nodes into the spec's pool;
// consolidateAfter is how long an empty node it launched lives. The pool
// and its nodes are removed after the spec.
func dataNodePool(ctx context.Context, env *utils.Env, consolidateAfter string) {
	np := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{utils.PoolLabel: env.Pool(), "role": "data"}},
				"spec": map[string]any{
					"nodeClassRef": map[string]any{"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": localcluster.KarpenterNodeClass},
					"requirements": []any{
						map[string]any{"key": "karpenter.sh/capacity-type", "operator": "In", "values": []any{"on-demand"}},
					},
					"expireAfter": "Never",
				},
			},
			"disruption": map[string]any{"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": consolidateAfter},
			"limits":     map[string]any{"cpu": "200"},
		},
	}}
	np.SetGroupVersionKind(nodePoolGVK)
	np.SetName(env.Namespace)
	Expect(k8sClient.Create(ctx, np)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, np))).To(Succeed())
		Eventually(func() []string { return launchedNodes(ctx, env) }).WithTimeout(time.Minute).Should(BeEmpty())
	})
}

// launchedNodes are the nodes Karpenter launched into the spec's pool.
func launchedNodes(ctx context.Context, env *utils.Env) []string {
	var nodes corev1.NodeList
	Expect(k8sClient.List(ctx, &nodes, client.MatchingLabels{utils.PoolLabel: env.Pool()}, client.HasLabels{"karpenter.sh/nodepool"})).To(Succeed())
	var out []string
	for _, n := range nodes.Items {
		out = append(out, n.Name)
	}
	return out
}

// readyLaunchedNode waits for a node Karpenter launched to be Ready and
// schedulable, and returns it with when it was first seen so.
func readyLaunchedNode(ctx context.Context, env *utils.Env) (string, time.Time) {
	var name string
	Eventually(func(g Gomega) {
		var nodes corev1.NodeList
		g.Expect(k8sClient.List(ctx, &nodes, client.MatchingLabels{utils.PoolLabel: env.Pool()}, client.HasLabels{"karpenter.sh/nodepool"})).To(Succeed())
		g.Expect(nodes.Items).NotTo(BeEmpty())
		n := nodes.Items[0]
		g.Expect(n.Spec.Taints).To(BeEmpty(), "registered: the unregistered taint is gone")
		ready := false
		for _, c := range n.Status.Conditions {
			ready = ready || c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		}
		g.Expect(ready).To(BeTrue())
		name = n.Name
	}).WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
	return name, time.Now()
}

// seed000 is incident 000's namespace: one data node shared by the search
// engine and the graph DB, one app node with the broker.
func seed000(ctx context.Context, env *utils.Env, mutate ...func(*appsv1.Deployment) *appsv1.Deployment) map[string]incarnation {
	_, err := env.AddNode(ctx, "data-1", map[string]string{"role": "data"})
	Expect(err).NotTo(HaveOccurred())
	_, err = env.AddNode(ctx, "app-1", map[string]string{"role": "app"})
	Expect(err).NotTo(HaveOccurred())
	for name, role := range map[string]string{"search": "data", "graphdb": "data", "broker": "app"} {
		d := utils.Deployment(env.Namespace, name, env.Pool(), 1, nil)
		d.Spec.Template.Spec.NodeSelector["role"] = role
		for _, m := range mutate {
			d = m(d)
		}
		Expect(k8sClient.Create(ctx, d)).To(Succeed())
	}
	allRunning(ctx, env.Namespace, nil, 3)
	return incarnations(ctx, env.Namespace, nil)
}

func seed000Spec(mode pgv1.ProvisionMode, maxNodes int32) pgv1.PlacementMigrationSpec {
	capacity := &pgv1.Capacity{NodeSelector: pgv1.Labels(map[string]string{"role": "data"})}
	if mode != "" {
		capacity.Provision = &pgv1.Provision{Mode: mode}
		if maxNodes > 0 {
			capacity.Provision.MaxNodes = ptr.To(maxNodes)
		}
	}
	return pgv1.PlacementMigrationSpec{
		Targets:    targetsNamed("graphdb"),
		Constraint: hostnameApart(map[string]string{"app": "search"}),
		Capacity:   capacity,
		Guards: &pgv1.Guards{ProtectedPods: pgv1.SelectorFrom(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"search", "broker"}}}})},
	}
}

// requestOf is the capacity request the migration's status records.
func requestOf(ctx context.Context, namespace, name string) *pgv1.CapacityRequestStatus {
	if c := getMigration(ctx, namespace, name).Status.Capacity; c != nil {
		return c.Request
	}
	return nil
}

func exists(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) bool {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u)
	if apierrors.IsNotFound(err) {
		return false
	}
	Expect(err).NotTo(HaveOccurred())
	return true
}

var (
	podTemplateGVK = corev1.SchemeGroupVersion.WithKind("PodTemplate")
	deploymentGVK  = appsv1.SchemeGroupVersion.WithKind("Deployment")
)

// Ordered: its specs run in the one process that runs Karpenter, beside
// the other processes' specs (Karpenter launches nodes only into a spec's
// own pool, for its own NodePool).
var _ = Describe("Asking a real Karpenter for the capacity a migration waits for", Label("operator", "autoscaler", "incident-000"), Ordered, func() {
	BeforeEach(func(ctx SpecContext) { startKarpenter(ctx) })

	for _, tc := range []struct {
		mode    pgv1.ProvisionMode
		primary schema.GroupVersionKind
		owned   []schema.GroupVersionKind
		// admission is the namespace's admission mode: the placeholders'
		// required anti-affinity must reach the autoscaler unjudged and
		// unsoftened in every mode.
		admission string
	}{
		{pgv1.ProvisionCapacityBuffer, bufferGVK, []schema.GroupVersionKind{bufferGVK, podTemplateGVK}, "Warn"},
		{pgv1.ProvisionPlaceholderPods, deploymentGVK, []schema.GroupVersionKind{deploymentGVK}, "Deny"},
		{pgv1.ProvisionPlaceholderPods, deploymentGVK, []schema.GroupVersionKind{deploymentGVK}, "Adopt"},
	} {
		It(fmt.Sprintf("seed 000 with mode %s in a %s namespace: asks for one data node, lets the request go once it qualifies, and succeeds", tc.mode, tc.admission), func(ctx SpecContext) {
			env := newEnv(ctx, "autoscale-"+strings.ToLower(string(tc.mode)+"-"+tc.admission))
			labelNamespace(ctx, env.Namespace, tc.admission)
			Expect(utils.BindPlaceholderRole(ctx, k8sClient, env.Namespace)).To(Succeed())
			dataNodePool(ctx, env, "30s")
			before := seed000(ctx, env)

			claims := countNodeClaims(ctx, env)
			created := time.Now()
			migration(ctx, env.Namespace, "graphdb-apart", seed000Spec(tc.mode, 1))
			name := "graphdb-apart-capacity"

			By("waiting for capacity, the request is recorded and created, owned by the migration")
			Eventually(func(g Gomega) {
				r := requestOf(ctx, env.Namespace, "graphdb-apart")
				g.Expect(r).NotTo(BeNil())
				g.Expect(r.Name).To(Equal(name))
				g.Expect(r.Replicas).To(Equal(int32(1)))
				g.Expect(r.Shortfall).To(Equal(int32(1)))
				g.Expect(conditionOf(ctx, env.Namespace, "graphdb-apart", pgv1.ConditionCapacityAvailable).Message).To(And(
					ContainSubstring("1 of 2 qualifying nodes (role=data)"), ContainSubstring("through "+tc.primary.Kind+" "+name)))
			}).Should(Succeed(), explain(ctx, env.Namespace, "graphdb-apart"))
			Expect(getMigration(ctx, env.Namespace, "graphdb-apart").Status.Phase).To(Equal(pgv1.PhaseWaitingForCapacity))
			pm := getMigration(ctx, env.Namespace, "graphdb-apart")
			for _, gvk := range tc.owned {
				Eventually(func() bool { return exists(ctx, gvk, env.Namespace, name) }).Should(BeTrue(), gvk.Kind)
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(gvk)
				Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: name}, u)).To(Succeed())
				Expect(u.GetOwnerReferences()).To(ContainElement(And(HaveField("UID", pm.UID), HaveField("Controller", ptr.To(true)))), gvk.Kind)
			}

			if tc.primary == deploymentGVK {
				By("the placeholders keep their required anti-affinity, never judged nor adopted by the operator's own check")
				placeholders := &appsv1.Deployment{}
				Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: name}, placeholders)).To(Succeed())
				Expect(placeholders.Labels).To(HaveKeyWithValue(pgv1.AdmissionLabel, "Off"))
				paa := placeholders.Spec.Template.Spec.Affinity.PodAntiAffinity
				Expect(paa.RequiredDuringSchedulingIgnoredDuringExecution).NotTo(BeEmpty(), "required, so that they stay Pending for the autoscaler")
				Expect(placeholders.Annotations).NotTo(HaveKey("placementguard.io/adopted"))
				var adopted pgv1.PlacementMigrationList
				Expect(k8sClient.List(ctx, &adopted, client.InNamespace(env.Namespace), client.HasLabels{"placementguard.io/adopted-from"})).To(Succeed())
				Expect(adopted.Items).To(BeEmpty())
			}

			By("Karpenter launches a data node for it")
			node, readyAt := readyLaunchedNode(ctx, env)

			By("once the node qualifies, the request is deleted before the soft stage")
			Eventually(func() bool { return exists(ctx, tc.primary, env.Namespace, name) }).Should(BeFalse())
			Eventually(func() *pgv1.CapacityRequestStatus { return requestOf(ctx, env.Namespace, "graphdb-apart") }).Should(BeNil())

			Eventually(phaseOf(ctx, env.Namespace, "graphdb-apart")).WithTimeout(3*time.Minute).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "graphdb-apart"))
			succeededAt := time.Now()
			for _, gvk := range tc.owned {
				Expect(exists(ctx, gvk, env.Namespace, name)).To(BeFalse(), gvk.Kind)
			}
			pm = getMigration(ctx, env.Namespace, "graphdb-apart")
			Expect(pm.Status.Targets[0].Stages).To(HaveLen(2))
			Expect(pm.Status.Targets[0].Stages[0].Stage).To(Equal(pgv1.StageSoft))
			Expect(pm.Status.Targets[0].Stages[1].Stage).To(Equal(pgv1.StageHard))
			Expect(findCondition(pm, pgv1.ConditionCapacityRequested)).To(BeNil(), "no request stands")

			By("the graph DB runs on Karpenter's node; search and broker kept uid, creation time and restarts")
			graphPods := allRunning(ctx, env.Namespace, map[string]string{"app": "graphdb"}, 1)
			Expect(graphPods[0].Spec.NodeName).To(Equal(node))
			after := incarnations(ctx, env.Namespace, nil)
			for podName, inc := range before {
				if strings.HasPrefix(podName, "search-") || strings.HasPrefix(podName, "broker-") {
					Expect(after).To(HaveKeyWithValue(podName, inc), podName)
				}
			}
			By("maxNodes 1 asked for one node, and Karpenter launched no other, whatever the timing")
			Consistently(claims).WithTimeout(15 * time.Second).WithPolling(time.Second).Should(HaveLen(1))
			AddReportEntry(fmt.Sprintf("autoscaler timing %s", tc.mode), fmt.Sprintf("creation to node Ready %.1fs, to Succeeded %.1fs",
				readyAt.Sub(created).Seconds(), succeededAt.Sub(created).Seconds()), ReportEntryVisibilityAlways)
		})
	}

	It("seed 000 whose pods fill Karpenter's smallest node, with maxNodes 1: asks once for a node that holds the hard stage's surge, succeeds, and ends with one NodeClaim", func(ctx SpecContext) {
		env := newEnv(ctx, "autoscale-small")
		dataNodePool(ctx, env, "30s")
		// Half a CPU each: Karpenter's smallest node (one CPU, 900m
		// allocatable) holds one of them.
		seed000(ctx, env, func(d *appsv1.Deployment) *appsv1.Deployment {
			d.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("500m")
			return d
		})
		claims := countNodeClaims(ctx, env)
		migration(ctx, env.Namespace, "graphdb-apart", seed000Spec(pgv1.ProvisionCapacityBuffer, 1))

		Eventually(phaseOf(ctx, env.Namespace, "graphdb-apart")).WithTimeout(4*time.Minute).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "graphdb-apart"))
		By("the request was sized for the graph DB and its surge beside it, and said so")
		Eventually(func() []string {
			return migrationEventNotes(ctx, env.Namespace, "graphdb-apart", pgv1.ReasonWaitingForCapacity)
		}).Should(
			ContainElement(ContainSubstring("each node asked for holds 2 pods of Deployment/graphdb")))
		pm := getMigration(ctx, env.Namespace, "graphdb-apart")
		Expect(pm.Status.Targets[0].Stages).To(HaveLen(2), "soft, then hard")
		Expect(pm.Status.Capacity).NotTo(BeNil(), explain(ctx, env.Namespace, "graphdb-apart"))
		Expect(pm.Status.Capacity.LaunchedNodes).To(HaveLen(1), func() string {
			return fmt.Sprintf("one node launched for the migration's requests; NodeClaims %v, pool nodes %v, capacity events %q",
				claims(), launchedNodes(ctx, env), append(migrationEventNotes(ctx, env.Namespace, "graphdb-apart", pgv1.ReasonWaitingForCapacity),
					migrationEventNotes(ctx, env.Namespace, "graphdb-apart", pgv1.ReasonCapacityRequestDeleted)...))
		})
		graphPods := allRunning(ctx, env.Namespace, map[string]string{"app": "graphdb"}, 1)
		Expect(graphPods[0].Spec.NodeName).To(Equal(pm.Status.Capacity.LaunchedNodes[0]))
		Consistently(claims).WithTimeout(15*time.Second).WithPolling(time.Second).Should(HaveLen(1), "maxNodes 1: one NodeClaim over the whole migration, after the hard stage too")
	})

	for _, mode := range []pgv1.ProvisionMode{pgv1.ProvisionCapacityBuffer, pgv1.ProvisionPlaceholderPods} {
		It(fmt.Sprintf("with mode %s and maxNodes 2, two data nodes missing: Karpenter makes two NodeClaims over the whole migration, never a third", mode), func(ctx SpecContext) {
			env := newEnv(ctx, "autoscale-two-"+strings.ToLower(string(mode)))
			Expect(utils.BindPlaceholderRole(ctx, k8sClient, env.Namespace)).To(Succeed())
			dataNodePool(ctx, env, "30s")
			seed000(ctx, env)
			claims := countNodeClaims(ctx, env)
			spec := seed000Spec(mode, 2)
			spec.Capacity.MinNodes = ptr.To[int32](3)
			migration(ctx, env.Namespace, "graphdb-apart", spec)

			Eventually(func(g Gomega) {
				r := requestOf(ctx, env.Namespace, "graphdb-apart")
				g.Expect(r).NotTo(BeNil())
				g.Expect(r.Shortfall).To(Equal(int32(2)))
			}).Should(Succeed(), explain(ctx, env.Namespace, "graphdb-apart"))
			Eventually(phaseOf(ctx, env.Namespace, "graphdb-apart")).WithTimeout(4*time.Minute).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "graphdb-apart"))
			Expect(requestOf(ctx, env.Namespace, "graphdb-apart")).To(BeNil(), "no request stands once the nodes qualify")
			Consistently(claims).WithTimeout(20*time.Second).WithPolling(time.Second).Should(HaveLen(2), "maxNodes 2: two NodeClaims over the whole migration")
		})
	}

	It("with a zone spread that needs a third zone: Karpenter makes one NodeClaim in a zone of its own, over the whole migration", func(ctx SpecContext) {
		env := newEnv(ctx, "autoscale-zones")
		dataNodePool(ctx, env, "30s")
		// Karpenter's kwok provider offers zones test-zone-a to -d; the
		// cluster has data nodes in the first two.
		for _, z := range []string{"a", "b"} {
			_, err := env.AddNode(ctx, "data-"+z, map[string]string{"role": "data", utils.ZoneLabel: "test-zone-" + z})
			Expect(err).NotTo(HaveOccurred())
		}
		web := utils.Deployment(env.Namespace, "web", env.Pool(), 2, nil)
		web.Spec.Template.Spec.NodeSelector["role"] = "data"
		Expect(k8sClient.Create(ctx, web)).To(Succeed())
		allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 2)
		claims := countNodeClaims(ctx, env)
		migration(ctx, env.Namespace, "web-zones", pgv1.PlacementMigrationSpec{
			Targets: targetsNamed("web"), Constraint: zoneSpread("web", 1),
			Capacity: &pgv1.Capacity{NodeSelector: pgv1.Labels(map[string]string{"role": "data"}), MinDomains: ptr.To[int32](3),
				Provision: &pgv1.Provision{Mode: pgv1.ProvisionCapacityBuffer, MaxNodes: ptr.To[int32](1)}},
		})
		Eventually(func(g Gomega) {
			r := requestOf(ctx, env.Namespace, "web-zones")
			g.Expect(r).NotTo(BeNil())
			g.Expect(r.Shortfall).To(Equal(int32(1)))
		}).Should(Succeed(), explain(ctx, env.Namespace, "web-zones"))
		Eventually(phaseOf(ctx, env.Namespace, "web-zones")).WithTimeout(4*time.Minute).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "web-zones"))
		var nodes corev1.NodeList
		Expect(k8sClient.List(ctx, &nodes, client.MatchingLabels{utils.PoolLabel: env.Pool()}, client.HasLabels{"karpenter.sh/nodepool"})).To(Succeed())
		Expect(nodes.Items).To(HaveLen(1))
		Expect(nodes.Items[0].Labels[utils.ZoneLabel]).To(BeElementOf("test-zone-c", "test-zone-d"), "the node asked for is in a zone of its own")
		Consistently(claims).WithTimeout(20*time.Second).WithPolling(time.Second).Should(HaveLen(1), "maxNodes 1: one NodeClaim over the whole migration")
	})

	It("with mode None creates nothing, and no node appears", func(ctx SpecContext) {
		env := newEnv(ctx, "autoscale-none")
		dataNodePool(ctx, env, "30s")
		seed000(ctx, env)
		migration(ctx, env.Namespace, "graphdb-apart", seed000Spec(pgv1.ProvisionNone, 0))
		Eventually(phaseOf(ctx, env.Namespace, "graphdb-apart")).Should(Equal(pgv1.PhaseWaitingForCapacity))
		Consistently(func(g Gomega) {
			g.Expect(requestOf(ctx, env.Namespace, "graphdb-apart")).To(BeNil())
			g.Expect(exists(ctx, podTemplateGVK, env.Namespace, "graphdb-apart-capacity")).To(BeFalse())
			g.Expect(exists(ctx, bufferGVK, env.Namespace, "graphdb-apart-capacity")).To(BeFalse())
			g.Expect(exists(ctx, deploymentGVK, env.Namespace, "graphdb-apart-capacity")).To(BeFalse())
			g.Expect(launchedNodes(ctx, env)).To(BeEmpty())
		}).WithTimeout(10 * time.Second).WithPolling(time.Second).Should(Succeed())
	})

	It("caps a larger shortfall at maxNodes and says so; deleting the migration mid-wait removes the request, and Karpenter consolidates its node", func(ctx SpecContext) {
		env := newEnv(ctx, "autoscale-cap")
		Expect(utils.BindPlaceholderRole(ctx, k8sClient, env.Namespace)).To(Succeed())
		dataNodePool(ctx, env, "5s")
		seed000(ctx, env)
		spec := seed000Spec(pgv1.ProvisionPlaceholderPods, 1)
		spec.Capacity.MinNodes = ptr.To[int32](3)
		migration(ctx, env.Namespace, "graphdb-apart", spec)

		By("two data nodes are missing; maxNodes 1 asks for one")
		Eventually(func(g Gomega) {
			r := requestOf(ctx, env.Namespace, "graphdb-apart")
			g.Expect(r).NotTo(BeNil())
			g.Expect(r.Replicas).To(Equal(int32(1)))
			g.Expect(r.Shortfall).To(Equal(int32(2)))
			c := findCondition(getMigration(ctx, env.Namespace, "graphdb-apart"), pgv1.ConditionCapacityRequested)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(pgv1.ReasonRequestCapped))
			g.Expect(c.Message).To(ContainSubstring("Asked for 1 of the 2 node(s) missing"))
			g.Expect(getMigration(ctx, env.Namespace, "graphdb-apart").Status.Conditions).To(ContainElement(And(HaveField("Type", pgv1.ConditionCapacityAvailable), HaveField("Message", ContainSubstring("capped by maxNodes")))))
		}).Should(Succeed(), explain(ctx, env.Namespace, "graphdb-apart"))

		By("Karpenter launches one node; the migration still waits for the other")
		readyLaunchedNode(ctx, env)
		Eventually(func(g Gomega) {
			pm := getMigration(ctx, env.Namespace, "graphdb-apart")
			g.Expect(pm.Status.Phase).To(Equal(pgv1.PhaseWaitingForCapacity))
			g.Expect(pm.Status.Capacity.QualifyingNodes).To(Equal(int32(2)), "the placeholder's node qualifies: placeholders hold no capacity")
		}).Should(Succeed(), explain(ctx, env.Namespace, "graphdb-apart"))
		Consistently(func() []string { return launchedNodes(ctx, env) }).WithTimeout(5 * time.Second).Should(HaveLen(1))

		By("deleting the migration removes the request, and Karpenter consolidates the node it launched")
		Expect(k8sClient.Delete(ctx, getMigration(ctx, env.Namespace, "graphdb-apart"))).To(Succeed())
		Eventually(func() bool { return exists(ctx, deploymentGVK, env.Namespace, "graphdb-apart-capacity") }).Should(BeFalse())
		Eventually(func() []string { return launchedNodes(ctx, env) }).WithTimeout(2 * time.Minute).Should(BeEmpty())
	})
})

// migrationEventNotes are the notes of the migration's Events of reason.
func migrationEventNotes(ctx context.Context, namespace, name, reason string) []string {
	var list corev1.EventList
	Expect(k8sClient.List(ctx, &list, client.InNamespace(namespace))).To(Succeed())
	var notes []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "PlacementMigration" && e.InvolvedObject.Name == name && e.Reason == reason {
			notes = append(notes, e.Message)
		}
	}
	return notes
}

// countNodeClaims watches, for the rest of the spec, the NodeClaims
// Karpenter makes for the spec's NodePool, and returns the names of every
// one seen so far, gone ones included: maxNodes bounds them all.
func countNodeClaims(ctx SpecContext, env *utils.Env) func() []string {
	var mu sync.Mutex
	seen := map[string]bool{}
	look := func() {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodeClaimList"})
		if err := k8sClient.List(ctx, list, client.MatchingLabels{"karpenter.sh/nodepool": env.Namespace}); err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, c := range list.Items {
			seen[c.GetName()] = true
		}
	}
	watchCtx, stop := context.WithCancel(ctx)
	DeferCleanup(stop)
	go func() {
		for watchCtx.Err() == nil {
			look()
			time.Sleep(200 * time.Millisecond)
		}
	}()
	return func() []string {
		look()
		mu.Lock()
		defer mu.Unlock()
		var names []string
		for n := range seen {
			names = append(names, n)
		}
		return names
	}
}

func findCondition(pm *pgv1.PlacementMigration, conditionType string) *metav1.Condition {
	for i := range pm.Status.Conditions {
		if pm.Status.Conditions[i].Type == conditionType {
			return &pm.Status.Conditions[i]
		}
	}
	return nil
}
