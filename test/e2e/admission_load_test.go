package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/webhook"
	"github.com/placement-guard/placement-guard/test/localcluster"
	"github.com/placement-guard/placement-guard/test/utils"
)

// servedSerial is the serial of the certificate the suite's operator
// serves now, as a TLS client sees it.
func servedSerial() string {
	conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", webhookPort), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only the served certificate is read
	Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// seed001 is seed 001's Deployment before the change: two replicas on two
// nodes, maxSurge 1, maxUnavailable 0.
func seed001(ctx SpecContext, env *utils.Env) {
	for _, n := range []string{"n1", "n2"} {
		_, err := env.AddNode(ctx, n, nil)
		Expect(err).NotTo(HaveOccurred())
	}
	web := utils.Deployment(env.Namespace, "web", env.Pool(), 2, nil)
	web.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
		MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}}
	Expect(k8sClient.Create(ctx, web)).To(Succeed())
	allRunning(ctx, env.Namespace, map[string]string{"app": "web"}, 2)
}

// Serial: every one of its updates must be judged, by the check every
// other spec's writes go through.
var _ = Describe("The admission check under load and when it is down", Label("operator", "admission"), Serial, func() {
	It("answers 50 Deployment updates a second for a minute, every one as it should, while its certificate is renewed", func(ctx SpecContext) {
		env := newEnv(ctx, "admit-load")
		labelNamespace(ctx, env.Namespace, "Deny")
		seed001(ctx, env)
		// The updates carry this resourceVersion: taken once the deployment
		// controller has written its last status of the rollout, or a status
		// written during the minute refuses them all as conflicts.
		var live *appsv1.Deployment
		Eventually(func(g Gomega) {
			live = getDeployment(ctx, env.Namespace, "web")
			st := live.Status
			g.Expect(st.ObservedGeneration).To(Equal(live.Generation))
			g.Expect([]int32{st.Replicas, st.UpdatedReplicas, st.ReadyReplicas, st.AvailableReplicas}).To(Equal([]int32{2, 2, 2, 2}))
		}).Should(Succeed())
		deadlock := live.DeepCopy()
		deadlock.Spec.Template.Spec.Affinity = utils.HostnameAntiAffinity(map[string]string{"app": "web"})
		image := live.DeepCopy()
		image.Spec.Template.Spec.Containers[0].Image = "registry.invalid/web:2"

		cfg := rest.CopyConfig(cluster.Config)
		cfg.QPS, cfg.Burst = 500, 500
		warned := &warnings{}
		cfg.WarningHandler = warned
		c, err := client.New(cfg, client.Options{Scheme: k8sClient.Scheme()})
		Expect(err).NotTo(HaveOccurred())

		// Every judged update must be refused: one admitted is a request
		// the check did not answer (failurePolicy Ignore admits it), or
		// answered past its budget (admitted with a warning). Every image
		// change must be admitted without a word.
		const rate, duration = 50, time.Minute
		type result struct {
			judged  bool
			err     error
			latency time.Duration
		}
		var (
			mu      sync.Mutex
			results []result
			behind  atomic.Int32
		)
		work := make(chan bool, rate)
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for judged := range work {
					obj := image.DeepCopy()
					if judged {
						obj = deadlock.DeepCopy()
					}
					start := time.Now()
					err := c.Update(context.Background(), obj, client.DryRunAll)
					mu.Lock()
					results = append(results, result{judged: judged, err: err, latency: time.Since(start)})
					mu.Unlock()
				}
			})
		}
		before := servedSerial()
		tick := time.NewTicker(time.Second / rate)
		deadline := time.Now().Add(duration)
		for i := 0; time.Now().Before(deadline); i++ {
			<-tick.C
			select {
			case work <- i%2 == 0:
			default:
				behind.Add(1) // every worker busy: the request is not sent
			}
		}
		tick.Stop()
		close(work)
		wg.Wait()
		after := servedSerial()

		var judged, plain []time.Duration
		for _, r := range results {
			if r.judged {
				Expect(r.err).To(HaveOccurred(), "a judged update was admitted: the check did not answer it in time")
				Expect(r.err.Error()).To(ContainSubstring("RolloutDeadlock"))
				judged = append(judged, r.latency)
			} else {
				Expect(r.err).NotTo(HaveOccurred())
				plain = append(plain, r.latency)
			}
		}
		Expect(warned.seen).To(BeEmpty(), "an image change was warned of, or a judgement ran past its budget")
		sent := len(results)
		Expect(sent).To(BeNumerically(">=", rate*int(duration/time.Second)*9/10), "%d sent, %d not sent with every worker busy", sent, behind.Load())
		Expect(after).NotTo(Equal(before), "the serving certificate was not renewed during the minute")
		AddReportEntry("admission under load", fmt.Sprintf("%d updates in %s (%d not sent); judged p50 %s p99 %s; image change p50 %s p99 %s; certificate %s -> %s",
			sent, duration, behind.Load(), percentile(judged, 50), percentile(judged, 99), percentile(plain, 50), percentile(plain, 99), before, after))
	})

	It("admits changes when the check is down or hangs, within the configuration's timeout (failurePolicy Ignore)", func(ctx SpecContext) {
		env := newEnv(ctx, "admit-down")
		_, err := env.AddNode(ctx, "n1", nil)
		Expect(err).NotTo(HaveOccurred())
		mark := map[string]string{"placementguard.io/e2e-down": env.Namespace}
		web := utils.Deployment(env.Namespace, "web", env.Pool(), 1, mark)
		Expect(k8sClient.Create(ctx, web)).To(Succeed())

		// The suite's configuration, as config/default installs it, sent to
		// a port of a manager that is not there, for this spec's
		// Deployment only.
		suite := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: webhookConfiguration}, suite)).To(Succeed())
		port, err := localcluster.FreePort()
		Expect(err).NotTo(HaveOccurred())
		url := fmt.Sprintf("https://127.0.0.1:%d%s", port, webhook.Path)
		down := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: env.Namespace + "-down"}, Webhooks: suite.Webhooks}
		down.Webhooks[0].ClientConfig.URL = &url
		down.Webhooks[0].ObjectSelector = &metav1.LabelSelector{MatchLabels: mark}
		Expect(k8sClient.Create(ctx, down)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, down))).To(Succeed()) })
		timeout := time.Duration(*down.Webhooks[0].TimeoutSeconds) * time.Second
		Expect(*down.Webhooks[0].FailurePolicy).To(Equal(admissionregistrationv1.Ignore))

		update := func(image string) time.Duration {
			// Settled first: a status write landing while the API server
			// waits for the check makes it run the admission again.
			Eventually(func() bool { return utils.RolledOut(getDeployment(ctx, env.Namespace, "web")) }).Should(BeTrue())
			d := getDeployment(ctx, env.Namespace, "web")
			patch := client.MergeFrom(d.DeepCopy())
			d.Spec.Template.Spec.Containers[0].Image = image
			start := time.Now()
			Expect(k8sClient.Patch(ctx, d, patch)).To(Succeed(), "the check being down must not stop a change")
			return time.Since(start)
		}
		By("nothing listening, as when the manager is stopped: admitted at once")
		refused := update("registry.invalid/web:2")
		Expect(refused).To(BeNumerically("<", timeout))

		By("a check that accepts the connection and never answers: admitted once the timeout runs out")
		listener, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(listener.Close)
		var held []net.Conn
		var heldMu sync.Mutex
		go func() {
			for {
				conn, err := listener.Accept()
				if err != nil {
					return
				}
				heldMu.Lock()
				held = append(held, conn)
				heldMu.Unlock()
			}
		}()
		DeferCleanup(func() {
			heldMu.Lock()
			defer heldMu.Unlock()
			for _, c := range held {
				_ = c.Close()
			}
		})
		hung := update("registry.invalid/web:3")
		// Once the timeout, or twice: a status write that lands while the
		// API server waits makes it run the admission again (update), and
		// under load one can land between the settling and the patch.
		Expect(hung).To(And(BeNumerically(">=", timeout-500*time.Millisecond), BeNumerically("<", 2*timeout+3*time.Second)))
		AddReportEntry("admission check down", fmt.Sprintf("nothing listening: %s; hanging: %s (timeoutSeconds %s)", refused.Round(time.Millisecond), hung.Round(time.Millisecond), timeout))
		Expect(getDeployment(ctx, env.Namespace, "web").Spec.Template.Spec.Containers[0].Image).To(Equal("registry.invalid/web:3"))
	})
})

// percentile is the p-th percentile of ds.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)].Round(time.Millisecond)
}
