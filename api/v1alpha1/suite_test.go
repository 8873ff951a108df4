package v1alpha1_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// These specs install the generated CRD into a real kube-apiserver and etcd
// (envtest, from the binaries `make cluster-binaries` builds), so that the
// schema, the defaults and the CEL rules are exercised exactly as a cluster
// runs them.

var (
	ctx       context.Context
	cancel    context.CancelFunc
	testEnv   *envtest.Environment
	k8sClient client.Client
)

func TestAPI(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "PlacementMigration API Suite")
}

var _ = BeforeSuite(func() {
	Expect(os.Getenv("KUBEBUILDER_ASSETS")).NotTo(BeEmpty(),
		"KUBEBUILDER_ASSETS must name the directory with etcd and kube-apiserver; run the tests with `make test`")
	ctx, cancel = context.WithCancel(context.Background())

	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		cancel()
		Expect(testEnv.Stop()).To(Succeed())
	})

	scheme := runtime.NewScheme()
	Expect(pgv1.AddToScheme(scheme)).To(Succeed())
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	// The version matrix (make test) runs this suite on the oldest
	// Kubernetes the bundle claims as well: make sure it ran there.
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	v, err := dc.ServerVersion()
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Printf("kube-apiserver %s\n", v.GitVersion)
	if want := os.Getenv("PLACEMENT_GUARD_EXPECT_KUBE_MINOR"); want != "" {
		Expect(v.Major+"."+v.Minor).To(Equal(want), "the suite ran on kube-apiserver %s", v.GitVersion)
	}
})
