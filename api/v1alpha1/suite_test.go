package v1alpha1_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/testenv"
)

// These specs install the generated CRD into a real kube-apiserver and etcd
// (envtest, from the binaries `make cluster-binaries` builds), so that the
// schema, the defaults and the CEL rules are exercised exactly as a cluster
// runs them.

var (
	ctx       context.Context
	k8sClient client.Client
)

func TestAPI(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "PlacementMigration API Suite")
}

var _ = BeforeSuite(func() {
	env := testenv.Start([]string{filepath.Join("..", "..", "config", "crd", "bases")}, pgv1.AddToScheme)
	ctx, k8sClient = env.Ctx, env.Client
	cfg := env.Config

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
