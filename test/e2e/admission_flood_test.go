package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
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
	It("keeps its metric series and memory bounded, and judges the API server's requests all along", func(ctx SpecContext) {
		env := newEnv(ctx, "admit-flood")
		labelNamespace(ctx, env.Namespace, "Deny")
		seed001(ctx, env)

		// A pod that reaches the port: it trusts what the API server
		// trusts, and comes from an address of its own.
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: webhookConfiguration}, cfg)).To(Succeed())
		pool := x509.NewCertPool()
		Expect(pool.AppendCertsFromPEM(cfg.Webhooks[0].ClientConfig.CABundle)).To(BeTrue())
		flooder := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{RootCAs: pool},
			DialContext:         (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext,
			MaxIdleConnsPerHost: 64,
		}}
		url := fmt.Sprintf("https://127.0.0.1:%d%s", webhookPort, webhook.Path)

		// Every crafted review names a namespace and, half of them, a
		// kind made up for it; the others are Deployments that add a hard
		// constraint, so that the check judges them.
		web := getDeployment(ctx, env.Namespace, "web")
		web.Spec.Template.Spec.Affinity = utils.HostnameAntiAffinity(map[string]string{"app": "web"})
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

		By("40 connections from one pod send crafted reviews for 20 s, while the API server's requests come every half second")
		floodCtx, stop := context.WithTimeout(ctx, 20*time.Second)
		defer stop()
		var sent, busy atomic.Int64
		var wg sync.WaitGroup
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
					if strings.Contains(body.String(), "as many changes as it may at once") {
						busy.Add(1)
					}
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
		Expect(admitted).To(BeZero(), "an API server request was admitted unjudged during the flood (the first %s; %d of %d crafted reviews found the check busy)", firstAdmitted, busy.Load(), sent.Load())
		Expect(judged).To(BeNumerically(">=", 20))
		for kind := range kinds {
			Expect([]string{"Deployment", "StatefulSet", "Other"}).To(ContainElement(kind), "a kind label from a request")
		}
		for ns := range namespaces {
			Expect(ns).NotTo(HavePrefix("crafted-"), "a namespace label from a request")
		}
		Expect(afterDurations-durations).To(BeNumerically("<=", 12), "new series of the duration histogram: kinds x modes x verdicts")
		Expect(afterFindings-findings).To(BeNumerically("<=", 4), "new series of the findings counter")
		AddReportEntry("admission flood", fmt.Sprintf("%d crafted reviews in 20 s (%d answered busy at once); %d API server requests judged, slowest %s; series: duration %d -> %d, findings %d -> %d; heap in use %d -> %d MiB",
			sent.Load(), busy.Load(), judged, slowest.Round(time.Millisecond), durations, afterDurations, findings, afterFindings, heapBefore>>20, heapAfter>>20), ReportEntryVisibilityAlways)
	})
})
