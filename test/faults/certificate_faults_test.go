package faults

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/certs"
	"github.com/placement-guard/placement-guard/internal/webhook"
	"github.com/placement-guard/placement-guard/test/localcluster"
	"github.com/placement-guard/placement-guard/test/utils"
)

// The Secret and the configuration the two replicas keep: the names
// config/rbac grants the rights to.
const (
	certSecretName    = "placement-guard-webhook-cert"
	certConfiguration = "placement-guard-validating-webhook-configuration"
)

// replicaLabel sends each probe to one replica: the configuration has a
// webhook per replica, each selecting the workloads of its label.
const replicaLabel = "faults.placementguard.io/replica"

// certReplica is one replica of the manager serving the check on a port
// of its own.
type certReplica struct {
	*manager
	port int
}

// servedAuthority is the authority of bundle that signed the certificate
// the replica serves now; "" when none did or it cannot be reached.
func (r certReplica) servedAuthority(bundle []byte) string {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)),
		&tls.Config{InsecureSkipVerify: true}) // the point is to read what is served
	if err != nil {
		return ""
	}
	defer conn.Close()
	peer := conn.ConnectionState().PeerCertificates
	if len(peer) == 0 {
		return ""
	}
	return certs.Issuer(&tls.Certificate{Certificate: [][]byte{peer[0].Raw}}, bundle)
}

// probes sends, every interval, a server-side dry run of seed 001's
// deadlock to each replica's Deployment in a Deny namespace, and counts
// the answers: refused (judged), or admitted (the API server could not
// call the check, which fails open).
type probes struct {
	mu                 sync.Mutex
	judged, unjudged   map[string]int
	unjudgedAt         []string
	stopped, suspended bool
}

func (p *probes) run(ctx context.Context, namespace string, names []string, interval time.Duration) {
	for {
		p.mu.Lock()
		stopped, suspended := p.stopped, p.suspended
		p.mu.Unlock()
		if stopped || ctx.Err() != nil {
			return
		}
		if !suspended {
			for _, name := range names {
				p.probe(ctx, namespace, name)
			}
		}
		time.Sleep(interval)
	}
}

func (p *probes) probe(ctx context.Context, namespace, name string) {
	live := &appsv1.Deployment{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, live); err != nil {
		return
	}
	deadlock := live.DeepCopy()
	deadlock.Spec.Template.Spec.Affinity = utils.HostnameAntiAffinity(map[string]string{"app": name})
	err := k8sClient.Patch(ctx, deadlock, client.MergeFrom(live), client.DryRunAll)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case err == nil:
		p.unjudged[name]++
		p.unjudgedAt = append(p.unjudgedAt, fmt.Sprintf("%s at %s", name, time.Now().Format("15:04:05.000")))
	case strings.Contains(err.Error(), "RolloutDeadlock"):
		p.judged[name]++
	}
}

func (p *probes) counts() (judged, unjudged map[string]int, at []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	judged, unjudged = map[string]int{}, map[string]int{}
	for k, v := range p.judged {
		judged[k] = v
	}
	for k, v := range p.unjudged {
		unjudged[k] = v
	}
	return judged, unjudged, append([]string(nil), p.unjudgedAt...)
}

func (p *probes) set(f func()) { p.mu.Lock(); defer p.mu.Unlock(); f() }

var _ = Describe("F18: the check's certificate under two replicas, its authority replaced, garbled and its Secret deleted", Label("faults", "F18"), func() {
	It("keeps every replica's certificate trusted, so that no probe is admitted unjudged, and follows the configuration replaced", func(ctx SpecContext) {
		env := newEnv(ctx, "f18")
		for _, n := range []string{"n1", "n2"} {
			_, err := env.AddNode(ctx, n, nil)
			Expect(err).NotTo(HaveOccurred())
		}
		ns := &corev1.Namespace{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: env.Namespace}, ns)).To(Succeed())
		ns.Labels[pgv1.AdmissionLabel] = "Deny"
		Expect(k8sClient.Update(ctx, ns)).To(Succeed())

		By("two replicas serve the check, each behind a webhook of its own, keeping one Secret and one configuration")
		var replicas []certReplica
		var hooks []admissionregistrationv1.ValidatingWebhook
		for i := range 2 {
			port, err := localcluster.FreePort()
			Expect(err).NotTo(HaveOccurred())
			proxy := startProxy()
			m := newManager(fmt.Sprintf("f18-%d", i+1), managerBinary, proxy.Kubeconfig, managerArgs("--leader-elect=true", "--leader-election-namespace=system",
				"--webhook-host=127.0.0.1", "--webhook-port="+strconv.Itoa(port), "--webhook-cert-secret=system/"+certSecretName,
				"--webhook-cert-hosts=127.0.0.1", "--webhook-configuration="+certConfiguration, "--mutating-webhook-configuration=",
				// A sync period of a minute (a tenth of the life), so that a
				// rotator that followed the Secret only on its period would
				// show its window within the spec.
				"--webhook-cert-validity=10m")...)
			DeferCleanup(m.stop)
			replicas = append(replicas, certReplica{manager: m, port: port})
			url := fmt.Sprintf("https://127.0.0.1:%d%s", port, webhook.Path)
			hooks = append(hooks, admissionregistrationv1.ValidatingWebhook{
				Name:                    fmt.Sprintf("r%d.workloads.placementguard.io", i+1),
				ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url},
				Rules:                   []admissionregistrationv1.RuleWithOperations{utils.WebhookRule()},
				FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
				SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
				TimeoutSeconds:          ptr.To[int32](5),
				AdmissionReviewVersions: []string{"v1"},
				NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": env.Namespace}},
				ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{replicaLabel: strconv.Itoa(i + 1)}},
			})
		}
		configuration := func() *admissionregistrationv1.ValidatingWebhookConfiguration {
			return &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: certConfiguration}, Webhooks: hooks}
		}
		Expect(k8sClient.Create(ctx, configuration())).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, configuration()))).To(Succeed())
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "system", Name: certSecretName}}))).To(Succeed())
		})
		var names []string
		for i := range replicas {
			name := fmt.Sprintf("web-%d", i+1)
			names = append(names, name)
			web := utils.Deployment(env.Namespace, name, env.Pool(), 2, map[string]string{replicaLabel: strconv.Itoa(i + 1)})
			web.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}}
			Expect(k8sClient.Create(ctx, web)).To(Succeed())
		}
		for _, r := range replicas {
			r.start()
		}
		Eventually(func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(k8sClient.List(ctx, pods, client.InNamespace(env.Namespace))).To(Succeed())
			running := 0
			for _, p := range pods.Items {
				if utils.Running(p) {
					running++
				}
			}
			g.Expect(running).To(Equal(4))
		}).Should(Succeed())

		secretBundle := func() []byte {
			s := &corev1.Secret{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: "system", Name: certSecretName}, s); err != nil {
				return nil
			}
			return certs.FromData(s.Data).Bundle
		}
		// bothServe waits until every replica serves a certificate of the
		// Secret's current authority, and returns how long that took.
		bothServe := func(since time.Time) time.Duration {
			Eventually(func(g Gomega) {
				s := &corev1.Secret{}
				g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "system", Name: certSecretName}, s)).To(Succeed())
				keys := certs.FromData(s.Data)
				current := keys.CurrentAuthority()
				g.Expect(current).NotTo(BeEmpty())
				g.Expect(keys.CertRenewal([]string{"127.0.0.1"}, time.Now())).To(BeEmpty())
				for _, r := range replicas {
					g.Expect(r.servedAuthority(keys.Bundle)).To(Equal(current), "%s serves a certificate of the Secret's authority", r.name)
				}
			}).WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
			return time.Since(since)
		}
		bothServe(time.Now())
		p := &probes{judged: map[string]int{}, unjudged: map[string]int{}}
		Eventually(func(g Gomega) {
			for _, name := range names {
				p.probe(ctx, env.Namespace, name)
			}
			judged, _, _ := p.counts()
			g.Expect(judged).To(HaveLen(2), "both replicas judge, from a synced view")
		}).Should(Succeed())
		p = &probes{judged: map[string]int{}, unjudged: map[string]int{}}
		go p.run(ctx, env.Namespace, names, 500*time.Millisecond)
		DeferCleanup(func() { p.set(func() { p.stopped = true }) })
		editSecret := func(edit func(map[string][]byte)) time.Time {
			s := &corev1.Secret{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "system", Name: certSecretName}, s)).To(Succeed())
			edit(s.Data)
			Expect(k8sClient.Update(ctx, s)).To(Succeed())
			return time.Now()
		}
		var took []string
		other, err := certs.New([]string{"elsewhere"}, time.Now(), 365*24*time.Hour)
		Expect(err).NotTo(HaveOccurred())

		By("the authority replaced by hand, with its key, as from a backup")
		at := editSecret(func(d map[string][]byte) { d[certs.KeyBundle], d[certs.KeyCAKey] = other.Bundle, other.CAKey })
		took = append(took, "replaced "+bothServe(at).Round(100*time.Millisecond).String())

		By("an authority from one's own PKI, without its key")
		own, err := certs.New([]string{"own"}, time.Now(), 365*24*time.Hour)
		Expect(err).NotTo(HaveOccurred())
		at = editSecret(func(d map[string][]byte) { d[certs.KeyBundle] = own.Bundle; delete(d, certs.KeyCAKey) })
		took = append(took, "own PKI "+bothServe(at).Round(100*time.Millisecond).String())

		By("the authority garbled")
		at = editSecret(func(d map[string][]byte) {
			d[certs.KeyBundle] = []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
		})
		took = append(took, "garbled "+bothServe(at).Round(100*time.Millisecond).String())

		By("the Secret deleted")
		Expect(k8sClient.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "system", Name: certSecretName}})).To(Succeed())
		took = append(took, "deleted "+bothServe(time.Now()).Round(100*time.Millisecond).String())

		// Settled: a few more probes of every replica after the last change.
		judgedBefore, _, _ := p.counts()
		Eventually(func() map[string]int { j, _, _ := p.counts(); return j }).Should(And(
			HaveKeyWithValue("web-1", BeNumerically(">", judgedBefore["web-1"]+2)), HaveKeyWithValue("web-2", BeNumerically(">", judgedBefore["web-2"]+2))))
		judged, unjudged, at2 := p.counts()
		Expect(unjudged).To(BeEmpty(), "probes admitted unjudged: %v", at2)
		Expect(judged["web-1"]).To(BeNumerically(">=", 10))
		Expect(judged["web-2"]).To(BeNumerically(">=", 10))

		By("the configuration replaced without a caBundle (a re-apply of the install): given back within seconds")
		// The API server cannot call the check until the caBundle is back;
		// no probe is sent in that moment, which belongs to whoever
		// replaced it.
		p.set(func() { p.suspended = true })
		time.Sleep(time.Second) // let a probe in flight finish
		Expect(k8sClient.Delete(ctx, configuration())).To(Succeed())
		replaced := time.Now()
		Expect(k8sClient.Create(ctx, configuration())).To(Succeed())
		Eventually(func(g Gomega) {
			cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: certConfiguration}, cfg)).To(Succeed())
			for _, h := range cfg.Webhooks {
				g.Expect(certs.Authorities(h.ClientConfig.CABundle)).To(ContainElement(certs.Authorities(secretBundle())[0]))
			}
		}).WithTimeout(10 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
		restored := time.Since(replaced)
		took = append(took, "configuration given back "+restored.Round(10*time.Millisecond).String())
		time.Sleep(2 * time.Second) // the API server's informer takes the configuration in
		p.set(func() { p.suspended = false })
		judgedBefore, _, _ = p.counts()
		Eventually(func() map[string]int { j, _, _ := p.counts(); return j }).Should(And(
			HaveKeyWithValue("web-1", BeNumerically(">", judgedBefore["web-1"]+2)), HaveKeyWithValue("web-2", BeNumerically(">", judgedBefore["web-2"]+2))))
		judged, unjudged, at2 = p.counts()
		Expect(unjudged).To(BeEmpty(), "probes admitted unjudged: %v", at2)
		AddReportEntry("F18", fmt.Sprintf("%d probes judged, none admitted unjudged; every replica on the Secret's authority after: %s",
			judged["web-1"]+judged["web-2"], strings.Join(took, ", ")), ReportEntryVisibilityAlways)
	}, NodeTimeout(6*time.Minute))
})
