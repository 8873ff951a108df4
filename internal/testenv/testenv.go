// Package testenv starts the real API server and etcd (envtest) that the
// packages' envtest suites run against: one per suite, stopped when the
// suite ends, whether it passed or not. Only tests import it.
package testenv

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

// Env is a started API server: its config, a client of it with the
// scheme's types, and a context that ends with the suite.
type Env struct {
	Ctx    context.Context
	Config *rest.Config
	Client client.Client
	Scheme *runtime.Scheme
}

// Run runs a package's specs, waiting for a condition at most 20 s and
// looking every 50 ms.
func Run(t *testing.T, suite string) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(20 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	RunSpecs(t, suite)
}

// Start starts an API server with the CRDs of crdDirs, and a client with
// client-go's types and those add registers; call it from BeforeSuite.
func Start(crdDirs []string, add ...func(*runtime.Scheme) error) Env {
	Expect(os.Getenv("KUBEBUILDER_ASSETS")).NotTo(BeEmpty(),
		"KUBEBUILDER_ASSETS must name the directory with etcd and kube-apiserver; run the tests with `make test`")
	ctx, cancel := context.WithCancel(context.Background())
	env := &envtest.Environment{CRDDirectoryPaths: crdDirs, ErrorIfCRDPathMissing: len(crdDirs) > 0}
	cfg, err := env.Start()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		cancel()
		Expect(env.Stop()).To(Succeed())
	})
	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	for _, f := range add {
		Expect(f(scheme)).To(Succeed())
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return Env{Ctx: ctx, Config: cfg, Client: c, Scheme: scheme}
}
