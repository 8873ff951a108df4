package e2e

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/test/utils"
)

// quietFor is how long settled migrations are watched for a write.
const quietFor = 60 * time.Second

// batchEvery is how long a pod no migration selects lives before it is
// deleted and the next is created.
const batchEvery = 250 * time.Millisecond

var _ = Describe("Migrations that share workloads, once settled", Label("operator", "quiet"), func() {
	It("write once per stage, one at a time, then nothing for a minute of pod churn; a blocked one writes nothing at all", func(ctx SpecContext) {
		env := newEnv(ctx, "quiet")
		_, err := env.AddZones(ctx, []string{"zone-a", "zone-b"}, 2)
		Expect(err).NotTo(HaveOccurred())
		Expect(k8sClient.Create(ctx, utils.Deployment(env.Namespace, "web", env.Pool(), 2, nil))).To(Succeed())
		Expect(k8sClient.Create(ctx, utils.Deployment(env.Namespace, "api", env.Pool(), 2, nil))).To(Succeed())
		allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 2)
		allRunning(ctx, env.Namespace, map[string]string{"app": "api"}, 2)

		By("two compatible migrations of web: a zone spread and a hostname spread")
		migration(ctx, env.Namespace, "web-zones", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: zoneSpread("web", 1)})
		hosts := zoneSpread("web", 1)
		hosts.TopologySpread.TopologyKey = corev1.LabelHostname
		migration(ctx, env.Namespace, "web-hosts", pgv1.PlacementMigrationSpec{Targets: targetsNamed("web"), Constraint: hosts})

		By("two incompatible migrations of api: anti-affinity per host, then per zone")
		migration(ctx, env.Namespace, "api-apart", pgv1.PlacementMigrationSpec{Targets: targetsNamed("api"), Constraint: hostnameApart(nil)})
		Eventually(phaseOf(ctx, env.Namespace, "api-apart")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "api-apart"))
		zones := hostnameApart(nil)
		zones.PodAntiAffinity.TopologyKey = utils.ZoneLabel
		migration(ctx, env.Namespace, "api-apart-zones", pgv1.PlacementMigrationSpec{Targets: targetsNamed("api"), Constraint: zones})

		Eventually(phaseOf(ctx, env.Namespace, "web-zones")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "web-zones"))
		Eventually(phaseOf(ctx, env.Namespace, "web-hosts")).Should(Equal(pgv1.PhaseSucceeded), explain(ctx, env.Namespace, "web-hosts"))
		Eventually(phaseOf(ctx, env.Namespace, "api-apart-zones")).Should(Equal(pgv1.PhaseBlocked), explain(ctx, env.Namespace, "api-apart-zones"))
		claimed := conditionOf(ctx, env.Namespace, "api-apart-zones", pgv1.ConditionReady)
		Expect(claimed.Reason).To(Equal(pgv1.ReasonTargetClaimed))
		Expect(claimed.Message).To(ContainSubstring("PlacementMigration api-apart"))

		web := getDeployment(ctx, env.Namespace, "web")
		Expect(web.Generation).To(Equal(int64(5)), "created at 1, then once per stage of each of the two migrations")
		keys := []string{}
		for _, c := range web.Spec.Template.Spec.TopologySpreadConstraints {
			Expect(c.WhenUnsatisfiable).To(Equal(corev1.DoNotSchedule))
			keys = append(keys, c.TopologyKey)
		}
		Expect(keys).To(ConsistOf(utils.ZoneLabel, corev1.LabelHostname))
		Expect(getDeployment(ctx, env.Namespace, "api").Generation).To(Equal(int64(3)), "created at 1, then Soft and Hard of api-apart only")

		By("deleting a pod of each Deployment every few seconds for a minute")
		type watched struct{ versions, generations map[string]string }
		snapshot := func() watched {
			w := watched{versions: map[string]string{}, generations: map[string]string{}}
			for _, name := range []string{"web-zones", "web-hosts", "api-apart", "api-apart-zones"} {
				w.versions[name] = getMigration(ctx, env.Namespace, name).ResourceVersion
			}
			for _, name := range []string{"web", "api"} {
				w.generations[name] = fmt.Sprint(getDeployment(ctx, env.Namespace, name).Generation)
			}
			return w
		}
		settled := snapshot()
		settledStatus := map[string]pgv1.PlacementMigrationStatus{}
		for name := range settled.versions {
			settledStatus[name] = getMigration(ctx, env.Namespace, name).Status
		}
		churn, stop := context.WithCancel(ctx)
		defer stop()
		go func() {
			defer GinkgoRecover()
			for churn.Err() == nil {
				for _, app := range []string{"web", "api"} {
					if pods, err := utils.PodsOf(churn, k8sClient, env.Namespace, map[string]string{"app": app}); err == nil && len(pods) > 0 {
						_ = k8sClient.Delete(churn, &pods[0])
					}
				}
				select {
				case <-churn.Done():
				case <-time.After(3 * time.Second):
				}
			}
		}()
		Consistently(snapshot, quietFor, time.Second).Should(Equal(settled), func() string {
			return "no migration status and no workload template is written; changed:" + statusChanges(ctx, env.Namespace, settledStatus)
		})
		stop()
		Expect(phaseOf(ctx, env.Namespace, "web-zones")()).To(Equal(pgv1.PhaseSucceeded))
		Expect(phaseOf(ctx, env.Namespace, "web-hosts")()).To(Equal(pgv1.PhaseSucceeded))

		By("creating and deleting pods no migration selects: the settled migrations are not even looked at")
		reconciles := func() map[string]float64 {
			out := map[string]float64{}
			for _, name := range []string{"web-zones", "web-hosts", "api-apart"} {
				out[name] = reconcilesOf(env.Namespace, name)
			}
			return out
		}
		Eventually(func() error { return allSettled(ctx, env.Namespace, "web", "api") }).Should(Succeed())
		var quiet map[string]float64
		Eventually(func() bool {
			now := reconciles()
			still := reflect.DeepEqual(now, quiet)
			quiet = now
			return still
		}).WithPolling(2*time.Second).Should(BeTrue(), "the churn of web's and api's pods has died down")
		unrelated, stopUnrelated := context.WithCancel(ctx)
		defer stopUnrelated()
		go func() {
			defer GinkgoRecover()
			for i := 0; unrelated.Err() == nil; i++ {
				pod := batchPod(env, i)
				_ = k8sClient.Create(unrelated, pod)
				select {
				case <-unrelated.Done():
				case <-time.After(batchEvery):
				}
				_ = k8sClient.Delete(unrelated, pod)
			}
		}()
		// Cluster-wide changes (another spec's nodes and namespaces, which
		// its teardown removes while this spec runs) still reach every
		// migration now and then, each alike: measured up to 8 in 15 s
		// beside the other e2e process. A batch pod created and deleted
		// every batchEvery would reach them at least 60 times in 15 s.
		grew := func() map[string]float64 {
			now := reconciles()
			for name := range now {
				now[name] -= quiet[name]
			}
			return now
		}
		Consistently(grew, 15*time.Second, time.Second).Should(HaveEach(BeNumerically("<=", 20)), "pods of app=batch concern no settled migration")
		stopUnrelated()
		By("deleting a pod of web: its migration looks again")
		pods, err := utils.PodsOf(ctx, k8sClient, env.Namespace, map[string]string{"app": "web"})
		Expect(err).NotTo(HaveOccurred())
		Expect(pods).NotTo(BeEmpty())
		Expect(k8sClient.Delete(ctx, &pods[0])).To(Succeed())
		// The control: the counter moves when a settled migration's own pod
		// changes, so the quiet above is the routing's, not a dead counter's.
		Eventually(func() float64 { return reconcilesOf(env.Namespace, "web-zones") }).Should(BeNumerically(">", quiet["web-zones"]))
	}, NodeTimeout(5*time.Minute))
})

// allSettled is nil once every pod of the apps runs.
func allSettled(ctx context.Context, namespace string, apps ...string) error {
	for _, app := range apps {
		pods, err := utils.PodsOf(ctx, k8sClient, namespace, map[string]string{"app": app})
		if err != nil {
			return err
		}
		for _, p := range pods {
			if !utils.Running(p) || p.DeletionTimestamp != nil {
				return fmt.Errorf("pod %s is not settled", p.Name)
			}
		}
	}
	return nil
}

// batchPod is a bare pod of the spec's pool that no migration selects.
func batchPod(env *utils.Env, i int) *corev1.Pod {
	d := utils.Deployment(env.Namespace, "batch", env.Pool(), 1, nil)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: fmt.Sprintf("batch-%d", i), Labels: d.Spec.Template.Labels},
		Spec:       d.Spec.Template.Spec,
	}
}

// statusChanges lists the status fields of the named migrations that
// differ from what they were, so that a write during churn says what it
// wrote.
func statusChanges(ctx context.Context, namespace string, before map[string]pgv1.PlacementMigrationStatus) string {
	out := ""
	for name, was := range before {
		now := getMigration(ctx, namespace, name).Status
		if d := cmp.Diff(was, now); d != "" {
			out += fmt.Sprintf("\n%s (-before +now):\n%s", name, d)
		}
	}
	return out
}

// reconcilesOf is how often the operator reconciled a migration, as its
// placementguard_migration_reconciles_total says.
func reconcilesOf(namespace, name string) float64 {
	return max(0, metricValue("placementguard_migration_reconciles_total", map[string]string{"namespace": namespace, "name": name}))
}
