package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"

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
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/plugin"
	"github.com/placement-guard/placement-guard/test/utils"
)

// packerProfile is the profile a second kube-scheduler runs on the local
// cluster: bin-packing, without spreading, for the pods that name it.
const packerProfile = `- schedulerName: packer
  plugins:
    score:
      disabled: [{name: InterPodAffinity}, {name: PodTopologySpread}]
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: MostAllocated}}
`

// clusterSchedulers is the configuration of the cluster's two schedulers,
// as the operator (and plan) are given it: the default profile the main
// kube-scheduler runs, and packer.
const clusterSchedulers = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
` + packerProfile

var _ = Describe("each pod predicted with the profile it names", Label("plugin", "landing", "profiles"), func() {
	It("predicts the default scheduler's pods and a second scheduler's pods each with its own profile, and blocks pods of a scheduler it was not told of", func(ctx SpecContext) {
		env := newEnv(ctx, "profiles")
		stop, err := cluster.StartScheduler(ctx, env.Namespace, "profiles:\n"+packerProfile)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(stop)
		sized := func(cpu, memory string) corev1.ResourceList {
			return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory), corev1.ResourcePods: resource.MustParse("110")}
		}
		for _, n := range []struct{ short, cpu, memory string }{{"big", "32", "128Gi"}, {"medium", "8", "32Gi"}, {"small", "4", "8Gi"}} {
			_, err := env.AddSizedNode(ctx, n.short, sized(n.cpu, n.memory))
			Expect(err).NotTo(HaveOccurred())
		}
		workload := func(name, scheduler string) *appsv1.Deployment {
			d := utils.Deployment(env.Namespace, name, env.Pool(), 3, nil)
			d.Spec.Template.Spec.SchedulerName = scheduler
			d.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}
			// One new pod at a time, each after the one before runs.
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}}
			Expect(k8sClient.Create(ctx, d)).To(Succeed())
			return d
		}
		workload("web", corev1.DefaultSchedulerName)
		workload("batch", "packer")
		allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 3)
		allRunning(ctx, env.Namespace, map[string]string{"app": "batch"}, 3)
		config := filepath.Join(GinkgoT().TempDir(), "schedulers.yaml")
		Expect(os.WriteFile(config, []byte(clusterSchedulers), 0o600)).To(Succeed())
		grantPlugin(ctx, env.Namespace, "planner")
		kp := kubectlPlacement(ctx, "system:serviceaccount:"+env.Namespace+":planner")
		spread := pgv1.Constraint{TopologySpread: &pgv1.TopologySpreadConstraint{TopologyKey: corev1.LabelHostname, MaxSkew: 1}}
		plan := func(name string, targets ...string) (plugin.Report, string) {
			manifest, err := yaml.Marshal(&pgv1.PlacementMigration{
				TypeMeta:   metav1.TypeMeta{APIVersion: pgv1.GroupVersion.String(), Kind: "PlacementMigration"},
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: env.Namespace},
				Spec:       pgv1.PlacementMigrationSpec{Targets: targetsNamed(targets...), FinalStage: pgv1.StageSoft, Constraint: spread}})
			Expect(err).NotTo(HaveOccurred())
			out, errOut, code := kp(string(manifest), "plan", "-f", "-", "-o", "json", "--scheduler-config", config)
			Expect(code).To(Equal(plugin.ExitOK), out+errOut)
			var report plugin.Report
			Expect(json.Unmarshal([]byte(out), &report)).To(Succeed())
			return report, out
		}

		By("one plan of both: each target's pods predicted with their own profile")
		both, out := plan("both", "web", "batch")
		Expect(both.SchedulerProfile).To(BeEmpty(), "the targets name different profiles: %s", out)
		profiles := map[string]string{}
		for _, t := range both.Stages[0].Targets {
			profiles[t.Name] = t.SchedulerProfile
		}
		Expect(profiles).To(Equal(map[string]string{"web": corev1.DefaultSchedulerName, "batch": "packer"}), out)

		for _, c := range []struct{ target, profile string }{{"web", corev1.DefaultSchedulerName}, {"batch", "packer"}} {
			By("plan names where " + c.target + "'s new pods land under " + c.profile + "; its scheduler then puts them there")
			report, out := plan(c.target, c.target)
			Expect(report.SchedulerProfile).To(Equal(c.profile), out)
			var predicted [][]string
			for _, s := range report.Stages[0].Targets[0].Steps {
				if s.Node != "" {
					predicted = append(predicted, append([]string{s.Node}, s.Tied...))
				}
			}
			Expect(predicted).To(HaveLen(3), out)
			migration(ctx, env.Namespace, c.target, pgv1.PlacementMigrationSpec{Targets: targetsNamed(c.target), FinalStage: pgv1.StageSoft, Constraint: spread})
			Eventually(phaseOf(ctx, env.Namespace, c.target)).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, c.target))
			Expect(getMigration(ctx, env.Namespace, c.target).Status.SchedulerProfile).To(Equal(c.profile))
			var landed []string
			for _, p := range allRunning(ctx, env.Namespace, map[string]string{"app": c.target}, 3) {
				landed = append(landed, p.Spec.NodeName)
			}
			Expect(assignable(landed, predicted)).To(BeTrue(), "%s put %s's pods on %v; the plan said %v:\n%s", c.profile, c.target, landed, predicted, out)
		}

		By("pods naming a scheduler the operator was not told of: blocked, not predicted with another profile")
		workload("stray", "nobody")
		migration(ctx, env.Namespace, "stray", pgv1.PlacementMigrationSpec{Targets: targetsNamed("stray"), FinalStage: pgv1.StageSoft, Constraint: spread})
		Eventually(func(g Gomega) {
			c := conditionOf(ctx, env.Namespace, "stray", pgv1.ConditionFeasible)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(placement.HazardUnknownScheduler))
			g.Expect(c.Message).To(ContainSubstring(`"nobody"`))
		}).Should(Succeed(), explain(ctx, env.Namespace, "stray"))
	})
})
