package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/webhook"
	"github.com/placement-guard/placement-guard/test/utils"
)

// seriesOf counts, in the manager's metrics, the series of a family and
// the values of one of its labels.
func seriesOf(family, label string) (series int, values map[string]bool) {
	values = map[string]bool{}
	for _, m := range scrape()[family].GetMetric() {
		series++
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				values[l.GetValue()] = true
			}
		}
	}
	return series, values
}

// heapInUse is the process's live heap after a collection.
func heapInUse() uint64 {
	goruntime.GC()
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	return m.HeapInuse
}

// Serial: it measures the heap of the process that runs the operator, and
// floods the check every other spec's writes go through.
var _ = Describe("The admission check under a flood of crafted reviews sent straight to its port", Label("operator", "admission"), Serial, func() {
	It("judges the API server's requests only, keeps Deny whole while pods from several addresses flood it, and answers a tenant's twenty million replicas within its budget with memory flat", func(ctx SpecContext) {
		env := newEnv(ctx, "admit-flood")
		labelNamespace(ctx, env.Namespace, "Deny")
		seed001(ctx, env)

		// Pods that reach the port: they trust what the API server
		// trusts, and come from four addresses of their own. They have no
		// certificate of the API server's.
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: webhookConfiguration}, cfg)).To(Succeed())
		pool := x509.NewCertPool()
		Expect(pool.AppendCertsFromPEM(cfg.Webhooks[0].ClientConfig.CABundle)).To(BeTrue())
		flooderFrom := func(addr string) *http.Client {
			return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
				TLSClientConfig:     &tls.Config{RootCAs: pool},
				DialContext:         (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}}).DialContext,
				MaxIdleConnsPerHost: 64,
			}}
		}
		url := fmt.Sprintf("https://127.0.0.1:%d%s", webhookPort, webhook.Path)

		// Every crafted review names a namespace and, half of them, a
		// kind made up for it; the others are Deployments that add a hard
		// constraint to as many replicas as a user may write, the most
		// costly objects to judge.
		web := getDeployment(ctx, env.Namespace, "web")
		web.Spec.Template.Spec.Affinity = utils.HostnameAntiAffinity(map[string]string{"app": "web"})
		web.Spec.Replicas = ptr.To[int32](math.MaxInt32)
		web.APIVersion, web.Kind = "apps/v1", "Deployment"
		var n atomic.Int64
		crafted := func() []byte {
			i := n.Add(1)
			obj := web.DeepCopy()
			obj.Namespace, obj.UID, obj.ResourceVersion = fmt.Sprintf("crafted-%d", i), types.UID(fmt.Sprintf("uid-%d", i)), ""
			raw, err := json.Marshal(obj)
			Expect(err).NotTo(HaveOccurred())
			kind := "Deployment"
			if i%2 == 0 {
				kind = fmt.Sprintf("Kind%d", i)
			}
			review, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
				Request: &admissionv1.AdmissionRequest{UID: types.UID(fmt.Sprintf("review-%d", i)), Kind: metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: kind},
					Resource: metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, Namespace: obj.Namespace, Name: obj.Name,
					Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}}})
			Expect(err).NotTo(HaveOccurred())
			return review
		}
		durations, _ := seriesOf("placementguard_admission_duration_seconds", "kind")
		findings, _ := seriesOf("placementguard_admission_findings_total", "namespace")
		heapBefore := heapInUse()

		By("40 connections from each of four addresses send crafted reviews for 20 s; a tenant's dry runs of twenty million replicas come through the API server; the Deny probe every half second")
		floodCtx, stop := context.WithTimeout(ctx, 20*time.Second)
		defer stop()
		var sent, strangers atomic.Int64
		var wg sync.WaitGroup
		for _, addr := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"} {
			flooder := flooderFrom(addr)
			for range 40 {
				wg.Go(func() {
					for floodCtx.Err() == nil {
						resp, err := flooder.Post(url, "application/json", bytes.NewReader(crafted()))
						if err != nil {
							continue
						}
						var body bytes.Buffer
						_, _ = body.ReadFrom(resp.Body)
						resp.Body.Close()
						sent.Add(1)
						if resp.StatusCode == http.StatusForbidden && strings.Contains(body.String(), "judges the API server's requests only") {
							strangers.Add(1)
						}
					}
				})
			}
		}
		// The tenant may create Deployments in the namespace: a dry run
		// of twenty million replicas spread over the hosts, as the review
		// that took a replica's memory past its limit.
		var bulkAnswers sync.Map
		var bulkSent atomic.Int64
		bulk := utils.Deployment(env.Namespace, "bulk", env.Pool(), 20_000_000, nil)
		bulk.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1000, TopologyKey: corev1.LabelHostname,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "bulk"}}}}
		for range 2 {
			wg.Go(func() {
				for floodCtx.Err() == nil {
					err := k8sClient.Create(ctx, bulk.DeepCopy(), client.DryRunAll)
					bulkSent.Add(1)
					msg := "created"
					if err != nil {
						msg = err.Error()
					}
					bulkAnswers.Store(firstWords(msg), true)
				}
			})
		}
		var judged, admitted int
		var slowest time.Duration
		// firstAdmitted is what the first request not refused for the
		// deadlock got: no error (admitted, unjudged), or another one.
		firstAdmitted := ""
		for floodCtx.Err() == nil {
			// The change against the Deployment as it is now: one built
			// on an older read carries its resourceVersion, which a status
			// update since makes conflict.
			current := getDeployment(ctx, env.Namespace, "web")
			deadlock := current.DeepCopy()
			deadlock.Spec.Template.Spec.Affinity = utils.HostnameAntiAffinity(map[string]string{"app": "web"})
			start := time.Now()
			err := k8sClient.Patch(ctx, deadlock, client.MergeFrom(current), client.DryRunAll)
			slowest = max(slowest, time.Since(start))
			if err != nil && strings.Contains(err.Error(), "RolloutDeadlock") {
				judged++
			} else {
				admitted++
				if firstAdmitted == "" {
					firstAdmitted = fmt.Sprintf("after %s: %v", time.Since(start).Round(time.Millisecond), err)
				}
			}
			time.Sleep(500 * time.Millisecond)
		}
		wg.Wait()

		afterDurations, kinds := seriesOf("placementguard_admission_duration_seconds", "kind")
		afterFindings, namespaces := seriesOf("placementguard_admission_findings_total", "namespace")
		heapAfter := heapInUse()
		Expect(sent.Load()).To(BeNumerically(">", 1000), "the flood was a flood")
		Expect(strangers.Load()).To(Equal(sent.Load()), "every crafted review is answered at once as not the API server's, never judged")
		Expect(admitted).To(BeZero(), "an API server request was admitted unjudged during the flood (the first %s)", firstAdmitted)
		Expect(judged).To(BeNumerically(">=", 20))
		var answers []string
		bulkAnswers.Range(func(k, _ any) bool { answers = append(answers, k.(string)); return true })
		Expect(answers).To(And(Not(BeEmpty()), HaveEach(ContainSubstring("20000000 replicas exceed the"))),
			"every dry run of twenty million replicas is refused for its bound, none unjudged nor admitted")
		Expect(int64(heapAfter)-int64(heapBefore)).To(BeNumerically("<", 64<<20), "the heap grew from %d to %d MiB", heapBefore>>20, heapAfter>>20)
		for kind := range kinds {
			Expect([]string{"Deployment", "StatefulSet", "Other"}).To(ContainElement(kind), "a kind label from a request")
		}
		for ns := range namespaces {
			Expect(ns).NotTo(HavePrefix("crafted-"), "a namespace label from a request")
		}
		Expect(afterDurations-durations).To(BeNumerically("<=", 12), "new series of the duration histogram: kinds x modes x verdicts")
		Expect(afterFindings-findings).To(BeNumerically("<=", 4), "new series of the findings counter")
		AddReportEntry("admission flood", fmt.Sprintf("%d crafted reviews from 4 addresses in 20 s, all answered as not the API server's; %d API server requests judged, slowest %s; %d dry runs of 20,000,000 replicas; series: duration %d -> %d, findings %d -> %d; heap in use %d -> %d MiB",
			sent.Load(), judged, slowest.Round(time.Millisecond), bulkSent.Load(), durations, afterDurations, findings, afterFindings, heapBefore>>20, heapAfter>>20), ReportEntryVisibilityAlways)
	})
})

// firstWords is an error's gist: what tells one answer of the check from
// another, without the names that differ from request to request.
func firstWords(msg string) string {
	if i := strings.Index(msg, "Unschedulable: "); i >= 0 {
		msg = msg[i:]
	}
	return msg[:min(len(msg), 160)]
}
