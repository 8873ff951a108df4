package e2e

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/test/localcluster"
	"github.com/placement-guard/placement-guard/test/utils"
)

// kubectlApply applies objects with the cluster's kubectl, as a user or a
// pipeline would, and returns its output and exit code.
func kubectlApply(ctx SpecContext, namespace string, extra []string, objs ...client.Object) (string, string, int) {
	bin, err := localcluster.FindBinaries()
	Expect(err).NotTo(HaveOccurred())
	var manifest bytes.Buffer
	for _, o := range objs {
		o.SetManagedFields(nil)
		o.SetResourceVersion("")
		o.SetUID("")
		o.SetCreationTimestamp(metav1.Time{})
		data, err := yaml.Marshal(o)
		Expect(err).NotTo(HaveOccurred())
		manifest.WriteString("---\n")
		manifest.Write(data)
	}
	args := append([]string{"--kubeconfig", cluster.Kubeconfig, "-n", namespace, "apply", "--server-side", "--force-conflicts", "-f", "-"}, extra...)
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), args...)
	cmd.Stdin = &manifest
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	code := 0
	if err := cmd.Run(); err != nil {
		exit, ok := err.(*exec.ExitError)
		Expect(ok).To(BeTrue(), "kubectl: %v", err)
		code = exit.ExitCode()
	}
	return stdout.String(), stderr.String(), code
}

// labelNamespace sets the admission mode of a spec's namespace.
func labelNamespace(ctx SpecContext, namespace string, mode string) {
	ns := &corev1.Namespace{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Name: namespace}, ns)).To(Succeed())
	patch := client.MergeFrom(ns.DeepCopy())
	ns.Labels[pgv1.AdmissionLabel] = mode
	Expect(k8sClient.Patch(ctx, ns, patch)).To(Succeed())
}

var _ = Describe("The admission check of changes that do not come as a migration", Label("operator", "admission"), func() {
	It("warns of seed 000's change applied straight to the graph DB, naming the qualifying nodes, and admits it (Warn)", func(ctx SpecContext) {
		env := newEnv(ctx, "admit-000")
		seed000(ctx, env)
		graph := getDeployment(ctx, env.Namespace, "graphdb")
		graph.Spec.Template.Spec.Affinity = utils.HostnameAntiAffinity(map[string]string{"app": "search"})
		graph.APIVersion, graph.Kind = "apps/v1", "Deployment"
		out, errOut, code := kubectlApply(ctx, env.Namespace, nil, graph)
		Expect(code).To(Equal(0), out+errOut)
		Expect(errOut).To(And(ContainSubstring("Warning: Deployment/graphdb: required anti-affinity on kubernetes.io/hostname InsufficientCapacity"),
			MatchRegexp(`have \d of 2 qualifying nodes`), ContainSubstring("Fix:")))
		Expect(getDeployment(ctx, env.Namespace, "graphdb").Spec.Template.Spec.Affinity).NotTo(BeNil(), "Warn admits the change")

		By("the finding persists as an Event on the Deployment, for those whose tools drop warnings")
		Expect(eventNotes(ctx, env.Namespace, "graphdb", "InsufficientCapacity")).To(ContainElement(ContainSubstring("qualifying nodes")))
	})

	It("refuses seed 001's shape with its fix in Deny mode, through a server dry run too, and lets an image change and a change that fits through", func(ctx SpecContext) {
		env := newEnv(ctx, "admit-001")
		labelNamespace(ctx, env.Namespace, "Deny")
		seed001(ctx, env)

		apart := getDeployment(ctx, env.Namespace, "web")
		apart.APIVersion, apart.Kind = "apps/v1", "Deployment"
		apart.Spec.Template.Spec.Affinity = utils.HostnameAntiAffinity(map[string]string{"app": "web"})
		for _, extra := range [][]string{{"--dry-run=server"}, nil} {
			Eventually(func(g Gomega) {
				out, errOut, code := kubectlApply(ctx, env.Namespace, extra, apart.DeepCopy())
				g.Expect(code).NotTo(Equal(0), out)
				g.Expect(errOut).To(And(ContainSubstring("denied the request"), ContainSubstring("RolloutDeadlock"), ContainSubstring("maxUnavailable: 1")))
			}).Should(Succeed(), "kubectl apply %v", extra)
		}
		Expect(getDeployment(ctx, env.Namespace, "web").Spec.Template.Spec.Affinity).To(BeNil(), "nothing was written")

		By("an image change of the same Deployment goes through without a word")
		image := getDeployment(ctx, env.Namespace, "web")
		image.APIVersion, image.Kind = "apps/v1", "Deployment"
		image.Spec.Template.Spec.Containers[0].Image = "registry.invalid/web:2"
		start := time.Now()
		_, errOut, code := kubectlApply(ctx, env.Namespace, nil, image)
		Expect(code).To(Equal(0), errOut)
		Expect(errOut).NotTo(ContainSubstring("Warning"))
		AddReportEntry("image change through the admission check", time.Since(start).String())
		allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 2)

		By("with maxUnavailable 1 the same anti-affinity fits, and is admitted silently")
		fits := getDeployment(ctx, env.Namespace, "web")
		fits.APIVersion, fits.Kind = "apps/v1", "Deployment"
		fits.Spec.Template.Spec.Affinity = utils.HostnameAntiAffinity(map[string]string{"app": "web"})
		fits.Spec.Strategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(1))
		_, errOut, code = kubectlApply(ctx, env.Namespace, nil, fits)
		Expect(code).To(Equal(0), errOut)
		Expect(strings.ToLower(errOut)).NotTo(ContainSubstring("warning"))

		By("off the request's path the same question asks the pre-flight too: with replicas == nodes a drain strands a pod, told as an Event")
		Expect(eventNotes(ctx, env.Namespace, "web", pgv1.ReasonEvictedPodUnplaceable)).To(ContainElement(
			ContainSubstring("once the change has rolled out, a drain of node")))
	})

	It("names the migration whose field a direct change writes, and judges the change all the same", func(ctx SpecContext) {
		env := newEnv(ctx, "admit-claimed")
		seed001(ctx, env)
		migration(ctx, env.Namespace, "web-apart", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hostnameApart(nil)})

		change := getDeployment(ctx, env.Namespace, "web")
		change.APIVersion, change.Kind = "apps/v1", "Deployment"
		change.Spec.Template.Spec.Affinity = utils.HostnameAntiAffinity(map[string]string{"app": "web"})
		_, errOut, code := kubectlApply(ctx, env.Namespace, []string{"--dry-run=server"}, change.DeepCopy())
		Expect(code).To(Equal(0), errOut)
		Expect(errOut).To(And(ContainSubstring("TargetClaimed: the change writes the pod anti-affinity term lists, which PlacementMigration web-apart writes"),
			ContainSubstring("RolloutDeadlock")), "the claim and the change's own hazard")

		By("in Deny the deadlock is refused, the migration named beside it")
		labelNamespace(ctx, env.Namespace, "Deny")
		Eventually(func(g Gomega) {
			_, errOut, code := kubectlApply(ctx, env.Namespace, nil, change.DeepCopy())
			g.Expect(code).NotTo(Equal(0))
			g.Expect(errOut).To(And(ContainSubstring("denied the request"), ContainSubstring("RolloutDeadlock"), ContainSubstring("PlacementMigration web-apart")))
		}).Should(Succeed())
		Expect(getDeployment(ctx, env.Namespace, "web").Spec.Template.Spec.Affinity).To(BeNil(), "nothing was written")
	})

	It("never judges a workload that opts out, nor a migration's own writes", func(ctx SpecContext) {
		env := newEnv(ctx, "admit-optout")
		labelNamespace(ctx, env.Namespace, "Deny")
		_, err := env.AddNode(ctx, "only", nil)
		Expect(err).NotTo(HaveOccurred())
		web := utils.Deployment(env.Namespace, "web", env.Pool(), 2, map[string]string{pgv1.AdmissionLabel: "Off"})
		web.APIVersion, web.Kind = "apps/v1", "Deployment"
		web.Spec.Template.Spec.Affinity = utils.HostnameAntiAffinity(map[string]string{"app": "web"})
		_, errOut, code := kubectlApply(ctx, env.Namespace, nil, web)
		Expect(code).To(Equal(0), errOut)

		By("a migration in a Deny namespace goes through its stages: its writes are its own, judged before it made them")
		_, err = env.AddNode(ctx, "second", nil)
		Expect(err).NotTo(HaveOccurred())
		db := utils.Deployment(env.Namespace, "db", env.Pool(), 1, nil)
		Expect(k8sClient.Create(ctx, db)).To(Succeed())
		allRunning(ctx, env.Namespace, map[string]string{"app": "db"}, 1)
		migration(ctx, env.Namespace, "db-apart", pgv1.PlacementMigrationSpec{Targets: targetsNamed("db"), Constraint: hostnameApart(nil)})
		Eventually(phaseOf(ctx, env.Namespace, "db-apart")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "db-apart"))
	})

	It("exempts a migration's field manager only from the operator: a user who may patch Deployments and names it is refused in Deny, judged in Warn", func(ctx SpecContext) {
		env := newEnv(ctx, "admit-forged")
		labelNamespace(ctx, env.Namespace, "Deny")
		seed001(ctx, env)
		const user = "jane@example.com"
		grantDeploymentPatch(ctx, env.Namespace, user)

		forged := getDeployment(ctx, env.Namespace, "web")
		forged.APIVersion, forged.Kind = "apps/v1", "Deployment"
		forged.Spec.Template.Spec.Affinity = utils.HostnameAntiAffinity(map[string]string{"app": "web"})
		for _, manager := range []string{"placement-guard/x", "placement-guard/web-apart"} {
			Eventually(func(g Gomega) {
				_, errOut, code := kubectlApply(ctx, env.Namespace, []string{"--as=" + user, "--field-manager=" + manager}, forged.DeepCopy())
				g.Expect(code).NotTo(Equal(0))
				g.Expect(errOut).To(And(ContainSubstring("denied the request"), ContainSubstring(`is reserved for placement-guard's migrations, and `+user+` is not the operator`)))
			}).Should(Succeed(), manager)
		}
		web := getDeployment(ctx, env.Namespace, "web")
		Expect(web.Spec.Template.Spec.Affinity).To(BeNil(), "nothing was written")
		for _, mf := range web.ManagedFields {
			Expect(mf.Manager).NotTo(HavePrefix("placement-guard/"), "no write passes as a migration's")
		}

		By("in Warn the same write is judged as any other: admitted with the deadlock named")
		labelNamespace(ctx, env.Namespace, "Warn")
		Eventually(func(g Gomega) {
			_, errOut, code := kubectlApply(ctx, env.Namespace, []string{"--as=" + user, "--field-manager=placement-guard/x", "--dry-run=server"}, forged.DeepCopy())
			g.Expect(code).To(Equal(0), errOut)
			g.Expect(errOut).To(And(ContainSubstring("RolloutDeadlock"), ContainSubstring("reserved for placement-guard's migrations")))
		}).Should(Succeed())
	})
})

var _ = Describe("A namespace whose admission label names no mode", Label("operator", "admission"), func() {
	It("is judged as Warn, never Off, and said on the namespace as an Event and a metric", func(ctx SpecContext) {
		env := newEnv(ctx, "admit-typo")
		seed001(ctx, env)
		labelNamespace(ctx, env.Namespace, "Denny")

		Eventually(func(g Gomega) {
			var list eventsv1.EventList
			g.Expect(k8sClient.List(ctx, &list, client.InNamespace("default"))).To(Succeed())
			found := false
			for _, e := range list.Items {
				found = found || e.Regarding.Kind == "Namespace" && e.Regarding.Name == env.Namespace && e.Reason == "UnknownAdmissionMode" &&
					strings.Contains(e.Note, `placementguard.io/admission="Denny" names no admission mode`)
			}
			g.Expect(found).To(BeTrue(), "a Warning Event on the namespace")
			_, namespaces := seriesOf("placementguard_admission_namespace_mode_unknown", "namespace")
			g.Expect(namespaces).To(HaveKey(env.Namespace))
		}).Should(Succeed())

		deadlock := getDeployment(ctx, env.Namespace, "web")
		deadlock.APIVersion, deadlock.Kind = "apps/v1", "Deployment"
		deadlock.Spec.Template.Spec.Affinity = utils.HostnameAntiAffinity(map[string]string{"app": "web"})
		_, errOut, code := kubectlApply(ctx, env.Namespace, []string{"--dry-run=server"}, deadlock)
		Expect(code).To(Equal(0), errOut)
		Expect(errOut).To(ContainSubstring("RolloutDeadlock"), "judged as Warn")

		By("fixed, the metric goes")
		labelNamespace(ctx, env.Namespace, "Warn")
		Eventually(func() map[string]bool {
			_, namespaces := seriesOf("placementguard_admission_namespace_mode_unknown", "namespace")
			return namespaces
		}).ShouldNot(HaveKey(env.Namespace))
	})
})

// grantDeploymentPatch lets user read and change the namespace's
// Deployments, as a team's deployer may.
func grantDeploymentPatch(ctx SpecContext, namespace, user string) {
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "deployer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "patch", "update"}}}}
	Expect(k8sClient.Create(ctx, role)).To(Succeed())
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "deployer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "deployer"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: "rbac.authorization.k8s.io", Name: user}}}
	Expect(k8sClient.Create(ctx, binding)).To(Succeed())
}
