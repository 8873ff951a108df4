package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/plugin"
	"github.com/placement-guard/placement-guard/test/utils"
)

// A soft zone spread applied while zone c had no node leaves the pods 3/3/0;
// zone c's nodes join and nothing moves them. Mode Evict moves them one at
// a time, each where the engine predicts, under the workload's
// PodDisruptionBudget.
var _ = Describe("Rebalance by eviction", Label("operator", "rebalance"), func() {
	// stacked spreads web's 6 pods 3/3 over zones a and b with a soft zone
	// spread (final stage Soft), a PodDisruptionBudget of maxUnavailable
	// budget, and the rebalance mode; it returns the env and the zones.
	stacked := func(ctx SpecContext, mode pgv1.RebalanceMode, budget intstr.IntOrString, volumes ...corev1.Volume) (*utils.Env, utils.Zones) {
		env := newEnv(ctx, "rebalance")
		Expect(utils.BindRebalanceRole(ctx, k8sClient, env.Namespace)).To(Succeed())
		Expect(utils.BindEvictRole(ctx, k8sClient, env.Namespace)).To(Succeed())
		_, zones := balancedDeployment(ctx, env, "web", []string{"zone-a", "zone-b"}, 6, volumes...)
		Expect(k8sClient.Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: "web"},
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &budget, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}})).To(Succeed())
		migration(ctx, env.Namespace, "web-zones", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: zoneSpread("web", 1),
			FinalStage: pgv1.StageSoft, Rebalance: &pgv1.Rebalance{Mode: mode}})
		Eventually(phaseOf(ctx, env.Namespace, "web-zones"), 3*time.Minute).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "web-zones"))
		Expect(zones.Count(allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 6))).To(Equal(map[string]int{"zone-a": 3, "zone-b": 3}))
		return env, zones
	}
	// zoneCJoins adds two nodes in zone c.
	zoneCJoins := func(ctx SpecContext, env *utils.Env, zones utils.Zones) {
		for _, n := range []string{"zone-c-0", "zone-c-1"} {
			name, err := env.AddNode(ctx, n, map[string]string{utils.ZoneLabel: "zone-c"})
			Expect(err).NotTo(HaveOccurred())
			zones["zone-c"] = append(zones["zone-c"], name)
		}
	}
	balanced := func(ctx context.Context, env *utils.Env) func() metav1.Condition {
		return func() metav1.Condition { return conditionOf(ctx, env.Namespace, "web-zones", pgv1.ConditionBalanced) }
	}

	It("moves the pods of a soft zone spread to the zone that joined, one at a time, each where the engine said", func(ctx SpecContext) {
		env, zones := stacked(ctx, pgv1.RebalanceEvict, intstr.FromInt32(1))
		Eventually(balanced(ctx, env)).Should(HaveField("Reason", pgv1.ReasonBalanced), "3/3 over the two zones there are is even")

		By("watching the Ready pods while zone c joins")
		var mu sync.Mutex
		fewestReady := 6
		watch, stop := context.WithCancel(ctx)
		defer stop()
		go func() {
			defer GinkgoRecover()
			for watch.Err() == nil {
				if pods, err := utils.PodsOf(watch, k8sClient, env.Namespace, map[string]string{"app": "web"}); err == nil {
					ready := 0
					for _, p := range pods {
						if utils.Running(p) && p.DeletionTimestamp == nil {
							ready++
						}
					}
					mu.Lock()
					fewestReady = min(fewestReady, ready)
					mu.Unlock()
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
		zoneCJoins(ctx, env, zones)

		Eventually(func() map[string]int {
			return zones.Count(allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 6))
		}, 3*time.Minute, time.Second).Should(Equal(map[string]int{"zone-a": 2, "zone-b": 2, "zone-c": 2}), explain(ctx, env.Namespace, "web-zones"))
		Eventually(balanced(ctx, env)).Should(And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", pgv1.ReasonBalanced)))
		stop()

		By("two moves, each replacement Ready where the engine placed it, never more than one pod down")
		rb := getMigration(ctx, env.Namespace, "web-zones").Status.Rebalance
		Expect(rb).NotTo(BeNil())
		Expect(rb.Move).To(BeNil())
		Expect(rb.Moves).To(HaveLen(2))
		for _, mv := range rb.Moves {
			Expect(mv).To(And(HaveField("Result", "Landed"), HaveField("To", "zone-c"), HaveField("LandedIn", "zone-c")), "%+v", mv)
		}
		Expect(rb.Moves[0].From).NotTo(Equal(rb.Moves[1].From), "one from each crowded zone")
		mu.Lock()
		defer mu.Unlock()
		Expect(fewestReady).To(BeNumerically(">=", 5))
		Expect(getMigration(ctx, env.Namespace, "web-zones").Status.Phase).To(Equal(pgv1.PhaseSucceeded))
	}, NodeTimeout(6*time.Minute))

	It("never moves a pod that keeps data on its node's disk (an emptyDir), saying why, until the migration opts in", func(ctx SpecContext) {
		scratch := corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
		env, zones := stacked(ctx, pgv1.RebalanceEvict, intstr.FromInt32(1), scratch)
		before := incarnations(ctx, env.Namespace, map[string]string{"app": "web"})
		zoneCJoins(ctx, env, zones)
		Eventually(balanced(ctx, env), time.Minute).Should(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", pgv1.ReasonNoMovablePod),
			HaveField("Message", ContainSubstring("keeps data on its node (emptyDir volume scratch on the node's disk)"))), explain(ctx, env.Namespace, "web-zones"))
		Consistently(func() map[string]incarnation {
			return incarnations(ctx, env.Namespace, map[string]string{"app": "web"})
		}, "5s").Should(Equal(before), "no pod was evicted")
		if rb := getMigration(ctx, env.Namespace, "web-zones").Status.Rebalance; rb != nil {
			Expect(rb.Move).To(BeNil())
			Expect(rb.Moves).To(BeEmpty())
		}

		By("spec.rebalance.moveLocalData lets them move")
		pm := getMigration(ctx, env.Namespace, "web-zones")
		patch := client.MergeFrom(pm.DeepCopy())
		pm.Spec.Rebalance.MoveLocalData = ptr.To(true)
		Expect(k8sClient.Patch(ctx, pm, patch)).To(Succeed())
		Eventually(func() map[string]int {
			return zones.Count(allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 6))
		}, 3*time.Minute, time.Second).Should(Equal(map[string]int{"zone-a": 2, "zone-b": 2, "zone-c": 2}), explain(ctx, env.Namespace, "web-zones"))
	}, NodeTimeout(6*time.Minute))

	It("moves nothing without mode Evict, and nothing a PodDisruptionBudget forbids, saying why", func(ctx SpecContext) {
		env, zones := stacked(ctx, pgv1.RebalanceDeletionCost, intstr.FromInt32(0))
		before := incarnations(ctx, env.Namespace, map[string]string{"app": "web"})
		zoneCJoins(ctx, env, zones)
		pm := getMigration(ctx, env.Namespace, "web-zones")
		patch := client.MergeFrom(pm.DeepCopy())
		pm.Annotations = map[string]string{"spec.example/poked": time.Now().String()}
		Expect(k8sClient.Patch(ctx, pm, patch)).To(Succeed())
		Consistently(func() map[string]incarnation {
			return incarnations(ctx, env.Namespace, map[string]string{"app": "web"})
		}, "5s").Should(Equal(before))

		By("kubectl placement plan, asked what the operator asks, names the move it will try")
		planned := firstPlannedMove(ctx, getMigration(ctx, env.Namespace, "web-zones"))

		By("mode Evict, under a budget that allows no disruption")
		pm = getMigration(ctx, env.Namespace, "web-zones")
		patch = client.MergeFrom(pm.DeepCopy())
		pm.Spec.Rebalance.Mode = pgv1.RebalanceEvict
		pm.Spec.Rebalance.MaxMovesPerHour = ptr.To(int32(2))
		Expect(k8sClient.Patch(ctx, pm, patch)).To(Succeed())
		Eventually(balanced(ctx, env), time.Minute).Should(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", pgv1.ReasonEvictionRefused),
			HaveField("Message", ContainSubstring("disruption budget"))), explain(ctx, env.Namespace, "web-zones"))
		Expect(incarnations(ctx, env.Namespace, map[string]string{"app": "web"})).To(Equal(before), "a refused eviction evicts nothing")
		rb := getMigration(ctx, env.Namespace, "web-zones").Status.Rebalance
		Expect(rb.Moves).NotTo(BeEmpty())
		Expect(rb.Moves[len(rb.Moves)-1].Result).To(Equal("Refused"))
		Expect(rb.Moves[0]).To(And(HaveField("Pod", planned.Pod), HaveField("From", planned.From), HaveField("To", planned.To), HaveField("Node", planned.Node)),
			"the operator's first move is the one plan gave")
		Expect(getMigration(ctx, env.Namespace, "web-zones").Status.Phase).To(Equal(pgv1.PhaseSucceeded))
	}, NodeTimeout(5*time.Minute))
})

// firstPlannedMove runs `kubectl placement plan` on the live cluster for pm
// with mode Evict, as a user would before turning it on, and returns the
// first move it lists.
func firstPlannedMove(ctx context.Context, pm *pgv1.PlacementMigration) plugin.MoveReport {
	manifest := &pgv1.PlacementMigration{TypeMeta: metav1.TypeMeta{APIVersion: pgv1.GroupVersion.String(), Kind: "PlacementMigration"},
		ObjectMeta: metav1.ObjectMeta{Namespace: pm.Namespace, Name: pm.Name}, Spec: *pm.Spec.DeepCopy()}
	manifest.Spec.Rebalance.Mode = pgv1.RebalanceEvict
	data, err := yaml.Marshal(manifest)
	Expect(err).NotTo(HaveOccurred())
	file := filepath.Join(GinkgoT().TempDir(), "migration.yaml")
	Expect(os.WriteFile(file, data, 0o600)).To(Succeed())
	var out, errOut bytes.Buffer
	code := plugin.Main([]string{"plan", "-f", file, "-o", "json", "--kubeconfig", cluster.Kubeconfig},
		genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	Expect(code).To(BeNumerically("<", 2), errOut.String())
	var report plugin.Report
	Expect(json.Unmarshal(out.Bytes(), &report)).To(Succeed(), out.String())
	Expect(report.Moves).NotTo(BeEmpty(), "plan lists no move: %s", out.String())
	return report.Moves[0]
}
