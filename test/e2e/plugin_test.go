package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/plugin"
	"github.com/placement-guard/placement-guard/test/utils"
)

// kubectlPlacement builds the plugin once and returns a runner of
// `kubectl placement ...` as kubectl finds it on PATH, as the user given.
func kubectlPlacement(ctx context.Context, as string) func(stdin string, args ...string) (string, string, int) {
	dir := GinkgoT().TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, "kubectl-placement"), "../../cmd/kubectl-placement")
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
	kubectl := filepath.Join(os.Getenv("PLACEMENT_GUARD_BIN"), "kubectl")
	return func(stdin string, args ...string) (string, string, int) {
		full := append([]string{"placement", "--kubeconfig", cluster.Kubeconfig, "--as", as}, args...)
		cmd := exec.CommandContext(ctx, kubectl, full...)
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
		cmd.Stdin = strings.NewReader(stdin)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if exit, ok := err.(*exec.ExitError); ok {
			code = exit.ExitCode()
		} else {
			Expect(err).NotTo(HaveOccurred())
		}
		return stdout.String(), stderr.String(), code
	}
}

// grantPlugin creates the plugin's roles, named for the spec, and binds
// the reader to a ServiceAccount of the namespace, cluster-wide; the steer
// role is left for the spec to bind.
func grantPlugin(ctx context.Context, namespace, sa string) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "plugin", "rbac.yaml"))
	Expect(err).NotTo(HaveOccurred())
	for _, doc := range strings.Split(string(data), "\n---\n") {
		role := &rbacv1.ClusterRole{}
		Expect(yaml.Unmarshal([]byte(doc), role)).To(Succeed())
		role.Name += "-" + namespace
		Expect(k8sClient.Create(ctx, role)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(k8sClient.Delete(ctx, role)).To(Succeed()) })
		subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: namespace}}
		ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}
		if strings.Contains(role.Name, "reader") {
			b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name}, Subjects: subjects, RoleRef: ref}
			Expect(k8sClient.Create(ctx, b)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { Expect(k8sClient.Delete(ctx, b)).To(Succeed()) })
			continue
		}
	}
}

// removeMigration deletes a migration and waits until it is gone, so that
// the next one of the same workload is not held back by it.
func removeMigration(ctx context.Context, namespace, name string) {
	pm := &pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	Expect(k8sClient.Delete(ctx, pm)).To(Succeed())
	Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(pm), pm))
	}).Should(BeTrue())
}

func hazardKeys(hs []pgv1.Hazard) []string {
	var out []string
	seen := map[string]bool{}
	for _, h := range hs {
		if k := h.Type + " " + h.Target; !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

var _ = Describe("kubectl placement on the live cluster", Label("plugin"), func() {
	It("plans as a dry-run migration does, under a read-only ServiceAccount, and steers a real migration", func(ctx SpecContext) {
		env := newEnv(ctx, "plugin")
		for _, n := range []string{"node-0", "node-1"} {
			_, err := env.AddNode(ctx, n, nil)
			Expect(err).NotTo(HaveOccurred())
		}
		web := utils.Deployment(env.Namespace, "web", env.Pool(), 2, nil)
		Expect(k8sClient.Create(ctx, web)).To(Succeed())
		allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 2)
		grantPlugin(ctx, env.Namespace, "planner")
		kp := kubectlPlacement(ctx, "system:serviceaccount:"+env.Namespace+":planner")

		By("a hard anti-affinity with replicas == nodes: the plugin and a dry-run migration find the same deadlock")
		hard := pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameApart(nil), DryRun: true}
		migration(ctx, env.Namespace, "hard-dry", hard)
		Eventually(phaseOf(ctx, env.Namespace, "hard-dry")).Should(Equal(pgv1.PhaseBlocked), explain(ctx, env.Namespace, "hard-dry"))
		operator := hazardKeys(getMigration(ctx, env.Namespace, "hard-dry").Status.Hazards)
		Expect(operator).To(ContainElement("RolloutDeadlock Deployment/web"))

		out, errOut, code := kp("", "plan", "-n", env.Namespace, "--target", "deploy/web", "--anti-affinity-key", "kubernetes.io/hostname", "-o", "json")
		Expect(code).To(Equal(plugin.ExitHazards), errOut)
		var report plugin.Report
		Expect(json.Unmarshal([]byte(out), &report)).To(Succeed())
		var found []pgv1.Hazard
		for _, s := range report.Stages {
			found = append(found, s.Hazards...)
		}
		Expect(hazardKeys(found)).To(Equal(operator))
		removeMigration(ctx, env.Namespace, "hard-dry")

		By("a soft spread over the pool: the same pods recreated as the dry run's plan")
		soft := pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameApart(nil), FinalStage: pgv1.StageSoft, DryRun: true}
		migration(ctx, env.Namespace, "soft-dry", soft)
		Eventually(phaseOf(ctx, env.Namespace, "soft-dry")).Should(Equal(pgv1.PhasePlanned), explain(ctx, env.Namespace, "soft-dry"))
		planned := getMigration(ctx, env.Namespace, "soft-dry").Status.Plan
		Expect(planned).To(HaveLen(1))
		manifest, err := yaml.Marshal(&pgv1.PlacementMigration{
			TypeMeta:   metav1.TypeMeta{APIVersion: pgv1.GroupVersion.String(), Kind: "PlacementMigration"},
			ObjectMeta: metav1.ObjectMeta{Name: "soft-dry", Namespace: env.Namespace}, Spec: soft})
		Expect(err).NotTo(HaveOccurred())
		out, errOut, code = kp(string(manifest), "plan", "-f", "-", "-o", "json")
		Expect(code).To(Equal(plugin.ExitOK), out+errOut)
		report = plugin.Report{}
		Expect(json.Unmarshal([]byte(out), &report)).To(Succeed())
		Expect(report.Stages).To(HaveLen(1))
		Expect(report.Stages[0].Targets[0].Recreates).To(ConsistOf(planned[0].Recreates))
		Expect(report.Stages[0].Targets[0].RecreatesCount).To(Equal(planned[0].RecreatesCount))
		Expect(report.Stages[0].Targets[0].Change).To(Equal(planned[0].Change))

		By("the read-only role cannot write, whatever the verb")
		_, errOut, code = kp("", "pause", "-n", env.Namespace, "soft-dry")
		Expect(code).To(Equal(plugin.ExitUsage))
		Expect(errOut).To(ContainSubstring("forbidden"))
		removeMigration(ctx, env.Namespace, "soft-dry")

		By("status, pause, resume and retry drive a real migration")
		bindSteer(ctx, env.Namespace, "planner")
		live := pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameApart(nil), FinalStage: pgv1.StageSoft, Paused: true}
		migration(ctx, env.Namespace, "soft", live)
		Eventually(phaseOf(ctx, env.Namespace, "soft")).Should(Equal(pgv1.PhasePaused))
		out, errOut, code = kp("", "status", "-n", env.Namespace, "soft")
		Expect(code).To(Equal(plugin.ExitOK), errOut)
		Expect(out).To(ContainSubstring("Phase: Paused (spec.paused)"))
		before := incarnations(ctx, env.Namespace, map[string]string{"app": "web"})

		_, errOut, code = kp("", "resume", "-n", env.Namespace, "soft")
		Expect(code).To(Equal(plugin.ExitOK), errOut)
		Eventually(phaseOf(ctx, env.Namespace, "soft")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "soft"))
		after := incarnations(ctx, env.Namespace, map[string]string{"app": "web"})
		for name := range before {
			Expect(after).NotTo(HaveKey(name), "the soft stage recreates every pod")
		}
		out, _, _ = kp("", "status", "-n", env.Namespace, "soft")
		Expect(out).To(ContainSubstring("Phase: Succeeded"))

		_, errOut, code = kp("", "pause", "-n", env.Namespace, "soft")
		Expect(code).To(Equal(plugin.ExitOK), errOut)
		Eventually(phaseOf(ctx, env.Namespace, "soft")).Should(Equal(pgv1.PhasePaused))
		_, errOut, code = kp("", "resume", "-n", env.Namespace, "soft")
		Expect(code).To(Equal(plugin.ExitOK), errOut)
		Eventually(phaseOf(ctx, env.Namespace, "soft")).Should(Equal(pgv1.PhaseSucceeded))

		_, errOut, code = kp("", "retry", "-n", env.Namespace, "soft")
		Expect(code).To(Equal(plugin.ExitOK), errOut)
		Expect(errOut).To(ContainSubstring("not RolledBack or Failed"))
		retried := getMigration(ctx, env.Namespace, "soft").Annotations[pgv1.RetryAnnotation]
		Expect(retried).NotTo(BeEmpty())
		Eventually(func() string { return getMigration(ctx, env.Namespace, "soft").Status.LastHandledRetry }).Should(Equal(retried))
		Eventually(phaseOf(ctx, env.Namespace, "soft")).Should(Equal(pgv1.PhaseSucceeded))
		Expect(incarnations(ctx, env.Namespace, map[string]string{"app": "web"})).To(Equal(after), "a retry of a healthy migration changes no pod")
	})
})

var _ = Describe("kubectl placement plan and the operator ask one question", Label("plugin", "one-question"), func() {
	It("names the migration that holds the field, as the operator does when given the same manifest", func(ctx SpecContext) {
		env := newEnv(ctx, "plan-claimed")
		_, err := env.AddZones(ctx, []string{"a", "b"}, 1)
		Expect(err).NotTo(HaveOccurred())
		Expect(k8sClient.Create(ctx, utils.Deployment(env.Namespace, "web", env.Pool(), 2, nil))).To(Succeed())
		allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 2)
		grantPlugin(ctx, env.Namespace, "planner")
		kp := kubectlPlacement(ctx, "system:serviceaccount:"+env.Namespace+":planner")
		zones := func(maxSkew int32) pgv1.Constraint {
			return pgv1.Constraint{TopologySpread: &pgv1.TopologySpreadConstraint{TopologyKey: utils.ZoneLabel, MaxSkew: maxSkew}}
		}
		migration(ctx, env.Namespace, "web-zones", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: zones(1), FinalStage: pgv1.StageSoft})
		Eventually(phaseOf(ctx, env.Namespace, "web-zones")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "web-zones"))

		looser := pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: zones(2), FinalStage: pgv1.StageSoft}
		manifest, err := yaml.Marshal(&pgv1.PlacementMigration{
			TypeMeta:   metav1.TypeMeta{APIVersion: pgv1.GroupVersion.String(), Kind: "PlacementMigration"},
			ObjectMeta: metav1.ObjectMeta{Name: "web-zones-looser", Namespace: env.Namespace}, Spec: looser})
		Expect(err).NotTo(HaveOccurred())
		out, errOut, code := kp(string(manifest), "plan", "-f", "-", "-o", "json")
		Expect(code).To(Equal(plugin.ExitHazards), out+errOut)
		var report plugin.Report
		Expect(json.Unmarshal([]byte(out), &report)).To(Succeed())
		Expect(report.Stages).NotTo(BeEmpty())
		Expect(report.Stages[0].Hazards).To(ConsistOf(And(HaveField("Type", pgv1.ReasonTargetClaimed),
			HaveField("Message", ContainSubstring("PlacementMigration web-zones,")))))

		migration(ctx, env.Namespace, "web-zones-looser", looser)
		Eventually(func() metav1.Condition {
			return conditionOf(ctx, env.Namespace, "web-zones-looser", pgv1.ConditionReady)
		}).Should(And(
			HaveField("Reason", pgv1.ReasonTargetClaimed), HaveField("Message", Equal(report.Stages[0].Hazards[0].Message))),
			explain(ctx, env.Namespace, "web-zones-looser"))
	})
})

// grantSteer gives the ServiceAccount sa of the namespace the plugin's
// reader role and its steer role there, as an on-call who may pause,
// resume, retry and abort migrations.
func grantSteer(ctx context.Context, namespace, sa string) {
	grantPlugin(ctx, namespace, sa)
	bindSteer(ctx, namespace, sa)
}

// bindSteer binds the plugin's steer role grantPlugin made to sa in its
// namespace.
func bindSteer(ctx context.Context, namespace, sa string) {
	Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "steer", Namespace: namespace},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: namespace}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "placement-guard-plugin-steer-" + namespace},
	})).To(Succeed())
}
