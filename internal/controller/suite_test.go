package controller

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/clusterstate"
	"github.com/placement-guard/placement-guard/internal/testenv"
)

// The controller's specs run against a real API server and etcd (envtest),
// started once for the package.

var (
	ctx       context.Context
	cfg       *rest.Config
	k8sClient client.Client
	scheme    *runtime.Scheme
)

func TestController(t *testing.T) { testenv.Run(t, "Controller Suite") }

var _ = BeforeSuite(func() {
	env := testenv.Start([]string{filepath.Join("..", "..", "config", "crd", "bases")}, pgv1.AddToScheme)
	ctx, cfg, k8sClient, scheme = env.Ctx, env.Config, env.Client, env.Scheme
	startManager()
})

// testClock is the reconciler's clock, and it stands still: time passes
// for the reconciler only when a spec moves it on (Step) to a soak's end,
// a stage timeout, a drift backoff or a pod's grace, so that what a spec
// sees never depends on how fast the machine runs it. Each spec starts it
// at real time, because the API server stamps what it stores with real
// time; a spec that creates a pod brings the clock up to the pod's
// creation stamp (reach), as a kubelet starts the pod the moment it is
// created.
var testClock = testingclock.NewFakeClock(time.Now())

var _ = BeforeEach(func() { testClock.SetTime(time.Now()) })

// reach moves the clock on to t when t is later than the clock: an object
// the API server stamped has been made by "now".
func reach(t time.Time) {
	if t.After(testClock.Now()) {
		testClock.SetTime(t)
	}
}

// now is the test clock's time, for what the specs stamp themselves: a
// pod's Ready or Unschedulable condition.
func now() metav1.Time { return metav1.NewTime(testClock.Now()) }

// stepAndLook moves the clock on by d and makes the reconciler look
// again at once, instead of at the real time it asked to be woken.
func stepAndLook(fc *fakeCluster, name string, d time.Duration) {
	testClock.Step(d)
	poke(fc, name)
}

// testGrace is how long a pod may stay Pending because of our constraint
// before the stage is rolled back, short so the rollback specs run fast.
const testGrace = 2 * time.Second

// startManager runs the reconciler in a manager against the envtest API
// server, as cmd/main does, until the suite ends. No workload controller
// or scheduler runs: the specs play their part.
func startManager() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  clusterstate.CacheOptions(),
		Client:                 clusterstate.ClientOptions(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	Expect((&PlacementMigrationReconciler{
		Client:             mgr.GetClient(),
		Scheme:             mgr.GetScheme(),
		Recorder:           mgr.GetEventRecorder("placement-guard"),
		Clock:              testClock,
		UnschedulableGrace: testGrace,
		FeedReadInterval:   clusterstate.DefaultFeedReadInterval,
	}).SetupWithManager(mgr)).To(Succeed())
	mgrCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(mgrCtx)).To(Succeed())
	}()
	DeferCleanup(func() {
		stop()
		Eventually(done).Should(BeClosed())
	})
}
