// Package e2e replays the incidents placement-guard exists for on a local
// cluster with the real scheduler and controllers. One cluster serves the
// whole suite; each spec has its own namespace and its own node pool.
package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/test/localcluster"
	"github.com/placement-guard/placement-guard/test/utils"
)

var (
	cluster   *localcluster.Cluster
	k8sClient client.Client
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(2 * time.Minute)
	SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	RunSpecs(t, "placement-guard e2e suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	var err error
	cluster, err = localcluster.Start(ctx, localcluster.Options{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cluster.Stop)

	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(pgv1.AddToScheme(scheme)).To(Succeed())
	k8sClient, err = client.New(cluster.Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(3*time.Minute))

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
