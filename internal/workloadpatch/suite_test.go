package workloadpatch_test

import (
	"context"
	"os"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Server-side apply's ownership rules live in the API server, so these specs
// run against a real one (envtest).

var (
	ctx       context.Context
	k8sClient client.Client
)

func TestWorkloadPatch(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Workload patch Suite")
}

var _ = BeforeSuite(func() {
	Expect(os.Getenv("KUBEBUILDER_ASSETS")).NotTo(BeEmpty(),
		"KUBEBUILDER_ASSETS must name the directory with etcd and kube-apiserver; run the tests with `make test`")
	var cancel context.CancelFunc
	ctx, cancel = context.WithCancel(context.Background())
	env := &envtest.Environment{}
	cfg, err := env.Start()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		cancel()
		Expect(env.Stop()).To(Succeed())
	})
	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
})
