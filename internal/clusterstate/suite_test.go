package clusterstate

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/testenv"
)

// The cluster state's specs run against a real API server and etcd
// (envtest), started once for the package: the informers and the feeds
// read what it serves.

var (
	ctx       context.Context
	cfg       *rest.Config
	k8sClient client.Client
	scheme    *runtime.Scheme
)

func TestClusterState(t *testing.T) { testenv.Run(t, "Cluster State Suite") }

var _ = BeforeSuite(func() {
	env := testenv.Start(nil)
	ctx, cfg, k8sClient, scheme = env.Ctx, env.Config, env.Client, env.Scheme
})
