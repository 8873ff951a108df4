package e2e

import (
	"encoding/json"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/plugin"
	"github.com/placement-guard/placement-guard/test/utils"
)

var _ = Describe("kubectl placement plan says where pods land", Label("plugin", "landing"), func() {
	It("prints the nodes kube-scheduler then puts the soft stage's pods on, over nodes of mixed sizes and a PreferNoSchedule taint", func(ctx SpecContext) {
		env := newEnv(ctx, "landing")
		sized := func(cpu, memory string) corev1.ResourceList {
			return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory), corev1.ResourcePods: resource.MustParse("110")}
		}
		for _, n := range []struct {
			short, cpu, memory string
			taints             []corev1.Taint
		}{
			{"big", "32", "128Gi", nil},
			{"medium", "8", "32Gi", nil},
			{"small", "2", "4Gi", nil},
			{"spot", "32", "128Gi", []corev1.Taint{{Key: "spot", Value: "true", Effect: corev1.TaintEffectPreferNoSchedule}}},
		} {
			_, err := env.AddSizedNode(ctx, n.short, sized(n.cpu, n.memory), n.taints...)
			Expect(err).NotTo(HaveOccurred())
		}
		// One new pod at a time, each after the one before runs.
		web := utils.Deployment(env.Namespace, "web", env.Pool(), 3, nil)
		web.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}
		web.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
			MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}}
		Expect(k8sClient.Create(ctx, web)).To(Succeed())
		before := allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 3)
		grantPlugin(ctx, env.Namespace, "planner")
		kp := kubectlPlacement(ctx, "system:serviceaccount:"+env.Namespace+":planner")

		By("plan predicts where each new pod of the soft stage lands")
		spec := pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), FinalStage: pgv1.StageSoft,
			Constraint: pgv1.Constraint{TopologySpread: &pgv1.TopologySpreadConstraint{TopologyKey: corev1.LabelHostname, MaxSkew: 1}}}
		manifest, err := yaml.Marshal(&pgv1.PlacementMigration{
			TypeMeta:   metav1.TypeMeta{APIVersion: pgv1.GroupVersion.String(), Kind: "PlacementMigration"},
			ObjectMeta: metav1.ObjectMeta{Name: "apart", Namespace: env.Namespace}, Spec: spec})
		Expect(err).NotTo(HaveOccurred())
		out, errOut, code := kp(string(manifest), "plan", "-f", "-", "-o", "json")
		Expect(code).To(Equal(plugin.ExitOK), out+errOut)
		var report plugin.Report
		Expect(json.Unmarshal([]byte(out), &report)).To(Succeed())
		Expect(report.SchedulerProfile).To(Equal(corev1.DefaultSchedulerName))
		var predicted [][]string
		for _, s := range report.Stages[0].Targets[0].Steps {
			if s.Node != "" {
				predicted = append(predicted, append([]string{s.Node}, s.Tied...))
			}
		}
		Expect(predicted).To(HaveLen(3), out)

		By("the operator rolls the soft stage out; kube-scheduler puts each new pod on a node the plan named for it")
		migration(ctx, env.Namespace, "apart", spec)
		Eventually(phaseOf(ctx, env.Namespace, "apart")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "apart"))
		var landed []string
		for _, p := range allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 3) {
			Expect(slices.ContainsFunc(before, func(b corev1.Pod) bool { return b.UID == p.UID })).To(BeFalse(), "the soft stage recreates every pod")
			landed = append(landed, p.Spec.NodeName)
		}
		Expect(assignable(landed, predicted)).To(BeTrue(), "kube-scheduler put the pods on %v; the plan said %v:\n%s", landed, predicted, out)
	})
})

// assignable reports whether each landed node can be matched to its own
// predicted step whose nodes hold it: the pods' creation order is not
// known to the second, so any order counts.
func assignable(landed []string, predicted [][]string) bool {
	if len(landed) == 0 {
		return true
	}
	for k, step := range predicted {
		if slices.Contains(step, landed[0]) {
			rest := slices.Delete(slices.Clone(predicted), k, k+1)
			if assignable(landed[1:], rest) {
				return true
			}
		}
	}
	return false
}
