// Package faults is the fault matrix: each spec runs a migration of a
// realistic shape on the local cluster (real etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kwok), with the operator's own
// binary as a child process behind a fault proxy, injects one fault at a
// stated moment, and checks the invariants all along (see invariants_test.go
// and docs/reliability.md).
package faults

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/test/faultproxy"
	"github.com/placement-guard/placement-guard/test/localcluster"
	"github.com/placement-guard/placement-guard/test/utils"
)

var (
	cluster   *localcluster.Cluster
	k8sClient client.Client
	// workDir holds the manager binary, proxy kubeconfigs and manager logs.
	workDir string
	// managerBinary is the operator, built from this tree.
	managerBinary string
)

func TestFaults(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(3 * time.Minute)
	SetDefaultEventuallyPollingInterval(250 * time.Millisecond)
	RunSpecs(t, "placement-guard fault matrix")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	var err error
	workDir = GinkgoT().TempDir()
	managerBinary = filepath.Join(workDir, "manager")
	build := exec.CommandContext(ctx, "go", "build", "-o", managerBinary, "../../cmd")
	build.Stdout, build.Stderr = GinkgoWriter, GinkgoWriter
	Expect(build.Run()).To(Succeed(), "build the manager")

	// kwok plays the kubelets but does not mark pods Ready again after the
	// node lifecycle controller marked them not Ready: a real kubelet's
	// prober does. A node grace period longer than F4's outage keeps that
	// gap of the simulation out of the measurement.
	cluster, err = localcluster.Start(ctx, localcluster.Options{ControllerManagerArgs: []string{"--node-monitor-grace-period=3m"}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cluster.Stop)
	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(pgv1.AddToScheme(scheme)).To(Succeed())
	k8sClient, err = client.New(cluster.Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	_, err = envtest.InstallCRDs(cluster.Config, envtest.CRDInstallOptions{Paths: []string{filepath.Join("..", "..", "config", "crd", "bases")}, ErrorIfPathMissing: true})
	Expect(err).NotTo(HaveOccurred())
	Expect(utils.GrantOperatorRBAC(ctx, k8sClient, filepath.Join("..", "..", "config", "rbac"))).To(Succeed())
}, NodeTimeout(5*time.Minute))

var _ = ReportAfterEach(func(report SpecReport) {
	if report.Failed() && cluster != nil {
		AddReportEntry("cluster logs", cluster.Logs(4000))
	}
})

// newEnv gives a spec its namespace and node pool and removes both after it.
// writesIn lists the writes the API server accepted in the namespaces:
// those of a spec's own migrations. A spec's manager watches every
// namespace, and may finalize the migrations of a spec run before it whose
// namespace is still being deleted; those writes are not the spec's.
func writesIn(p *faultproxy.Proxy, namespaces ...string) func() []string {
	return func() []string {
		return p.CommittedList(func(r faultproxy.Request) bool { return slices.Contains(namespaces, r.Namespace) })
	}
}

func newEnv(ctx SpecContext, prefix string) *utils.Env {
	env, err := utils.NewEnv(ctx, cluster, k8sClient, prefix)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) { Expect(env.Cleanup(ctx)).To(Succeed()) })
	return env
}

// webOneAHost is a migration F21 and F22 share: web's pods one a host,
// on nodes of the data role, whatever the pods' age.
func webOneAHost(namespace string) *pgv1.PlacementMigration {
	return &pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "web-apart"}, Spec: pgv1.PlacementMigrationSpec{
		Targets:    []pgv1.TargetRef{{Kind: pgv1.KindDeployment, Name: "web"}},
		Constraint: pgv1.Constraint{PodAntiAffinity: &pgv1.PodAntiAffinityConstraint{TopologyKey: corev1.LabelHostname}},
		Capacity:   &pgv1.Capacity{NodeSelector: pgv1.Labels(map[string]string{"role": dataRole})},
		Guards:     &pgv1.Guards{MinPodAge: &metav1.Duration{}},
	}}
}

// phaseOf is for Eventually: pm's phase as the API server holds it, read
// into pm.
func phaseOf(ctx context.Context, pm *pgv1.PlacementMigration) func() pgv1.Phase {
	return func() pgv1.Phase {
		_ = k8sClient.Get(ctx, client.ObjectKeyFromObject(pm), pm)
		return pm.Status.Phase
	}
}
