package findings

import (
	"context"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/clusterstate"
	"github.com/placement-guard/placement-guard/internal/clusterview"
	"github.com/placement-guard/placement-guard/internal/testenv"
)

// The findings controller's specs run against a real API server and etcd
// (envtest), with the engine's cluster state fed by a manager as in the
// operator. The specs call Reconcile themselves, as a leader would on a
// workload's change, so that what was judged, and when, is theirs to say.

var (
	ctx       context.Context
	cfg       *rest.Config
	k8sClient client.Client
	mgr       manager.Manager
	cluster   clusterview.View
)

func TestFindings(t *testing.T) { testenv.Run(t, "Admission findings Suite") }

var _ = BeforeSuite(func() {
	env := testenv.Start([]string{filepath.Join("..", "..", "..", "config", "crd", "bases")}, pgv1.AddToScheme)
	ctx, cfg, k8sClient = env.Ctx, env.Config, env.Client
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	mgr, err = ctrl.NewManager(cfg, ctrl.Options{
		Scheme: env.Scheme, Cache: clusterstate.CacheOptions(), Client: clusterstate.ClientOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	state, feeds, err := clusterstate.Setup(mgr, 0)
	Expect(err).NotTo(HaveOccurred())
	cluster = clusterview.View{Reader: mgr.GetClient(), State: state, Feeds: feeds}
	Expect(cluster.Warm(ctx, mgr.GetCache())).To(Succeed())
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
	// Two nodes of 110 pods each: what every spec's workloads are judged
	// against.
	for _, name := range []string{"node-a", "node-b"} {
		Expect(k8sClient.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}})).To(Succeed())
		node := &corev1.Node{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, node)).To(Succeed())
		node.Status = corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		}
		Expect(k8sClient.Status().Update(ctx, node)).To(Succeed())
		// The API server taints a new node not-ready; the node lifecycle
		// controller, which does not run here, would lift it.
		node.Spec.Taints = nil
		Expect(k8sClient.Update(ctx, node)).To(Succeed())
	}
	Eventually(cluster.Synced).Should(BeTrue())
})
