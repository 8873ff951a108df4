package gates

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// server is one API server for the package's tests, with placement-guard's
// CRD and the tools' own.
type server struct {
	dynamic dynamic.Interface
	mapper  *restmapper.DeferredDiscoveryRESTMapper
}

var (
	once     sync.Once
	shared   *server
	startErr error
	stop     func()
)

func TestMain(m *testing.M) {
	code := m.Run()
	if stop != nil {
		stop()
	}
	os.Exit(code)
}

// apiServer starts the API server the first time a test asks for it.
func apiServer(t *testing.T) *server {
	t.Helper()
	once.Do(func() {
		var crds []string
		for _, u := range upstreamCRDs {
			f, err := u.file()
			if err != nil {
				startErr = err
				return
			}
			crds = append(crds, f)
		}
		env := &envtest.Environment{
			CRDDirectoryPaths:     append([]string{filepath.Join("..", "..", "config", "crd", "bases")}, crds...),
			ErrorIfCRDPathMissing: true,
		}
		cfg, err := env.Start()
		if err != nil {
			startErr = err
			return
		}
		stop = func() { _ = env.Stop() }
		cs := kubernetes.NewForConfigOrDie(cfg)
		for _, ns := range []string{"flux-system", "argocd", "db", "cluster-eu-1", "platform"} {
			if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				startErr = err
				return
			}
		}
		shared = &server{
			dynamic: dynamic.NewForConfigOrDie(cfg),
			mapper:  restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(cfg))),
		}
	})
	if startErr != nil {
		t.Fatalf("start envtest (KUBEBUILDER_ASSETS=%q): %v", os.Getenv("KUBEBUILDER_ASSETS"), startErr)
	}
	return shared
}
