package workloadpatch_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/testenv"
)

// Server-side apply's ownership rules live in the API server, so these specs
// run against a real one (envtest).

var (
	ctx       context.Context
	k8sClient client.Client
)

func TestWorkloadPatch(t *testing.T) { testenv.Run(t, "Workload patch Suite") }

var _ = BeforeSuite(func() {
	env := testenv.Start(nil)
	ctx, k8sClient = env.Ctx, env.Client
})
