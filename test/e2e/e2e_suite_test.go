// Package e2e replays the incidents placement-guard exists for on a local
// cluster with the real scheduler and controllers. One cluster serves the
// whole suite; each spec has its own namespace and its own node pool.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/test/localcluster"
	"github.com/placement-guard/placement-guard/test/utils"
)

var (
	cluster   *localcluster.Cluster
	k8sClient client.Client
	// webhookPort is where the suite's operator serves the admission check.
	webhookPort int
	// metricsURL is where it serves its metrics.
	metricsURL string
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(2 * time.Minute)
	SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	RunSpecs(t, "placement-guard e2e suite")
}

// shared is what the process that starts the cluster and the operator
// tells the others: the suite's processes run specs in parallel (ginkgo
// -p) on the one cluster and the one operator.
type shared struct {
	WorkDir     string
	WebhookPort int
	MetricsURL  string
}

// stopOperator stops the suite's operator, on the process that runs it.
var stopOperator func() error

var _ = SynchronizedBeforeSuite(func(ctx SpecContext) []byte {
	var err error
	cluster, err = localcluster.Start(ctx, localcluster.Options{})
	Expect(err).NotTo(HaveOccurred())
	k8sClient = newClient(cluster)

	// The operator runs in this process, as cmd/main wires it, against the
	// local cluster, impersonating the ServiceAccount config/rbac grants:
	// every operator spec is also a proof that those permissions suffice.
	// The baseline specs never create a PlacementMigration, so it leaves
	// them alone.
	setLogger()
	Expect(utils.GrantOperatorRBAC(ctx, k8sClient, filepath.Join("..", "..", "config", "rbac"))).To(Succeed())
	// The admission policies users are told to install are in force for
	// the whole suite: every operator spec also proves that the operator
	// writes nothing they refuse.
	Expect(utils.InstallPolicies(ctx, k8sClient, filepath.Join("..", "..", "config", "policies"), utils.OperatorUser())).To(Succeed())
	// It serves the admission check too, registered by URL as a manager
	// running outside the cluster is: every Deployment and StatefulSet the
	// suite writes goes through it, in Warn mode but where a spec's
	// namespace says otherwise. It keeps its certificate itself, with the
	// rights config/rbac gives it, in the Secret and the configuration
	// config/default names, renewing the certificate every 40 s or so and
	// its authority every 7 minutes: every spec's writes are answered while
	// they rotate.
	ports, err := localcluster.FreePorts(2)
	Expect(err).NotTo(HaveOccurred())
	webhookPort = ports[0]
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", ports[1])
	Expect(utils.RegisterWebhook(ctx, k8sClient, webhookConfiguration, webhookPort, nil)).To(Succeed())
	Expect(utils.RegisterAdoptWebhook(ctx, k8sClient, mutatingConfiguration, webhookPort, nil)).To(Succeed())
	stopOperator, err = utils.RunOperator(context.Background(), cluster.Config, utils.OperatorOptions{
		CRDDir:                filepath.Join("..", "..", "config", "crd", "bases"),
		UnschedulableGrace:    operatorGrace,
		AsUser:                utils.OperatorUser(),
		WebhookPort:           webhookPort,
		CertSecret:            webhookCertSecret,
		WebhookConfiguration:  webhookConfiguration,
		MutatingConfiguration: mutatingConfiguration,
		CertValidity:          time.Minute,
		MetricsAddr:           metricsAddr,
		// The API server presents its webhook client certificate, as
		// docs/operations.md tells an administrator to configure it: the
		// check judges its requests only.
		APIServerClientCA:   cluster.WebhookClientCA,
		APIServerClientName: localcluster.WebhookClientName,
		// The cluster's schedulers: the default one, and the packer a
		// spec starts (plan_profiles_test.go).
		SchedulerConfig: clusterSchedulers,
	})
	Expect(err).NotTo(HaveOccurred())
	Eventually(func(g Gomega) {
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: webhookConfiguration}, cfg)).To(Succeed())
		g.Expect(cfg.Webhooks[0].ClientConfig.CABundle).NotTo(BeEmpty(), "the manager has not given the configuration its authority")
		adopt := &admissionregistrationv1.MutatingWebhookConfiguration{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: mutatingConfiguration}, adopt)).To(Succeed())
		g.Expect(adopt.Webhooks[0].ClientConfig.CABundle).NotTo(BeEmpty(), "the manager has not given Adopt mode's configuration its authority")
	}).Should(Succeed())
	data, err := json.Marshal(shared{WorkDir: cluster.WorkDir, WebhookPort: webhookPort, MetricsURL: "http://" + metricsAddr + "/metrics"})
	Expect(err).NotTo(HaveOccurred())
	return data
}, func(ctx SpecContext, data []byte) {
	var s shared
	Expect(json.Unmarshal(data, &s)).To(Succeed())
	webhookPort, metricsURL = s.WebhookPort, s.MetricsURL
	if cluster != nil {
		return // this process started it
	}
	setLogger()
	var err error
	cluster, err = localcluster.Attach(s.WorkDir)
	Expect(err).NotTo(HaveOccurred())
	k8sClient = newClient(cluster)
}, NodeTimeout(3*time.Minute))

// setLogger gives controller-runtime this process's logger, written to
// the spec's output: every process builds clients (a spec's impersonating
// one too), and controller-runtime reports, with a stack, a client built
// before its logger is set.
func setLogger() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
}

// The operator and the cluster stop once every process has finished its
// specs; a process's own components (Karpenter) stop with it.
var _ = SynchronizedAfterSuite(func() {
	if cluster != nil && stopOperator == nil {
		cluster.Stop()
	}
}, func() {
	if stopOperator != nil {
		Expect(stopOperator()).To(Succeed())
	}
	if cluster != nil {
		cluster.Stop()
	}
})

// newClient is a client of the suite's cluster with the API types the
// specs read.
func newClient(c *localcluster.Cluster) client.Client {
	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(pgv1.AddToScheme(scheme)).To(Succeed())
	Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	cl, err := client.New(c.Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return cl
}

// The Secret and the webhook configuration the suite's operator keeps: the
// names config/default gives them, in the namespace config/rbac's Role is
// in before config/default places it.
var (
	webhookCertSecret     = types.NamespacedName{Namespace: utils.OperatorAccountNamespace, Name: "placement-guard-webhook-cert"}
	webhookConfiguration  = "placement-guard-validating-webhook-configuration"
	mutatingConfiguration = "placement-guard-mutating-webhook-configuration"
)

// operatorGrace is how long a pod may stay Pending because of a stage's
// constraint before the operator rolls the stage back.
const operatorGrace = 5 * time.Second

// The component logs of the cluster are attached to every failed spec.
var _ = ReportAfterEach(func(report SpecReport) {
	if report.Failed() && cluster != nil {
		AddReportEntry("cluster logs", cluster.Logs(6000))
	}
})

// newEnv gives a spec its namespace and node pool and removes both after it.
func newEnv(ctx context.Context, prefix string) *utils.Env {
	env, err := utils.NewEnv(ctx, cluster, k8sClient, prefix)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		Expect(env.Cleanup(ctx)).To(Succeed())
	})
	return env
}
