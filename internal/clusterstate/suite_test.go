package clusterstate

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The cluster state's specs run against a real API server and etcd
// (envtest), started once for the package: the informers and the feeds
// read what it serves.

var (
	ctx       context.Context
	cfg       *rest.Config
	k8sClient client.Client
	scheme    = runtime.NewScheme()
)

func TestClusterState(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(20 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	RunSpecs(t, "Cluster State Suite")
}

var _ = BeforeSuite(func() {
	Expect(os.Getenv("KUBEBUILDER_ASSETS")).NotTo(BeEmpty(),
		"KUBEBUILDER_ASSETS must name the directory with etcd and kube-apiserver; run the tests with `make test`")
	var cancel context.CancelFunc
	ctx, cancel = context.WithCancel(context.Background())
	env := &envtest.Environment{}
	var err error
	cfg, err = env.Start()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		cancel()
		Expect(env.Stop()).To(Succeed())
	})
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
})
