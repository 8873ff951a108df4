package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// admissionNamespace holds the Deployments the stream of updates changes.
const admissionNamespace = "bench-admission"

// The stream's two Deployments.
const (
	webName    = "web"
	pinnedName = "pinned"
)

// admissionReplicas is the size of each Deployment the stream changes,
// as in the engine's judgement benchmarks.
const admissionReplicas = 100

// change is one kind of update in the stream: how it alters a Deployment,
// and whether the check must refuse it.
type change struct {
	name   string
	target string
	refuse bool
	apply  func(*appsv1.Deployment)
}

// changes are the stream's updates, sent in turn: every other one an image
// change the check answers without the engine, the rest judged.
func changes() []change {
	image := change{name: "image change (not judged)", target: webName, apply: func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Image += "-next"
	}}
	return []change{
		image,
		{name: "hard hostname anti-affinity that fits", target: webName, apply: func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Affinity = hostnameAntiAffinity(d.Spec.Template.Labels)
		}},
		image,
		{name: "hard zone spread and hard anti-affinity", target: webName, apply: func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Affinity = hostnameAntiAffinity(d.Spec.Template.Labels)
			d.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: d.Spec.Template.Labels}, MatchLabelKeys: []string{appsv1.DefaultDeploymentUniqueLabelKey}}}
		}},
		image,
		{name: "seed 001's deadlock (refused)", target: pinnedName, refuse: true, apply: func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Affinity.PodAntiAffinity = hostnameAntiAffinity(d.Spec.Template.Labels).PodAntiAffinity
		}},
	}
}

func hostnameAntiAffinity(labels map[string]string) *corev1.Affinity {
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}}}}
}

// admissionDeployments are the stream's targets: "web", 100 replicas
// anywhere, rolled out 25% at a time; "pinned", seed 001's shape at
// scale, 100 replicas on the 100 nodes its node affinity names, maxSurge
// 1 and maxUnavailable 0.
func admissionDeployments() []*appsv1.Deployment {
	web := deployment(client.ObjectKey{Namespace: admissionNamespace, Name: webName})
	web.Spec.Replicas = ptr.To[int32](admissionReplicas)
	pinned := deployment(client.ObjectKey{Namespace: admissionNamespace, Name: pinnedName})
	pinned.Spec.Replicas = ptr.To[int32](admissionReplicas)
	pinned.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
		MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}}
	names := make([]string, admissionReplicas)
	for i := range names {
		names[i] = nodeName(i)
	}
	pinned.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: names}}}}}}}
	return []*appsv1.Deployment{web, pinned}
}

// admissionResult is what the stream measured.
type admissionResult struct {
	rate     int
	duration time.Duration
	sent     int
	notSent  int32
	// latencies are the API server's answers as the client saw them, by
	// change: the API server's own work, the call to the check and the
	// check's.
	latencies map[string][]time.Duration
	order     []string
	// served are the check's own times, from its histogram.
	served []histogram
	// calls are the updates' times at each step of their path during the
	// stream, and the API server's CPU and collector then.
	calls callSides
	// lead is the API server's load from the check's manager starting
	// (its first list of every pod) to the stream: what the stream begins
	// on.
	lead apiServerStretch
	// collected is how long the API server's collection asked for just
	// before the stream took; 0 when none was asked for.
	collected time.Duration
	// machine is each CPU's time over the stream.
	machine machineTimes
}

// measureAdmission serves the admission check from a manager of its own
// (Deny mode, a serving certificate for 127.0.0.1 given to the API server
// by URL), deploys the stream's targets, and sends rate dry-run updates a
// second for o.admissionFor: the check judges each with every pod of the
// cluster in view; nothing is written.
func measureAdmission(ctx context.Context, o options, cfg *rest.Config, c client.Client, lc latencyCluster, kubeconfig string) (admissionResult, error) {
	res := admissionResult{rate: o.admissionRate, duration: o.admissionFor, latencies: map[string][]time.Duration{}}
	certDir, err := os.MkdirTemp("", "bench-admission-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(certDir)
	bundle, err := servingCert(certDir)
	if err != nil {
		return res, err
	}
	ports, err := freePorts(1)
	if err != nil {
		return res, err
	}
	leadStart, err := readAPIServerLoad(ctx, cfg)
	if err != nil {
		return res, err
	}
	m, err := startManager(o.manager, kubeconfig, "--admission-mode=Deny", "--webhook-host=127.0.0.1",
		"--webhook-port="+strconv.Itoa(ports[0]), "--webhook-cert-path="+certDir)
	if err != nil {
		return res, err
	}
	defer m.stop()
	if err := m.waitReady(ctx); err != nil {
		return res, err
	}
	check, err := shippedCheck(o.kustomize, o.installConfig, "bench-admission", ports[0], bundle)
	if err != nil {
		return res, err
	}
	if err := c.Create(ctx, check); client.IgnoreAlreadyExists(err) != nil {
		return res, fmt.Errorf("register the check: %w", err)
	}
	defer func() {
		_ = c.Delete(context.Background(), &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "bench-admission"}})
	}()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: admissionNamespace}}); client.IgnoreAlreadyExists(err) != nil {
		return res, err
	}
	if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: admissionNamespace, Name: "default"}}); client.IgnoreAlreadyExists(err) != nil {
		return res, err
	}
	live := map[string]*appsv1.Deployment{}
	for _, d := range admissionDeployments() {
		if err := lc.deploy(ctx, d); err != nil {
			return res, fmt.Errorf("deploy %s: %w", d.Name, err)
		}
		key := client.ObjectKeyFromObject(d)
		if err := lc.waitAvailable(ctx, key); err != nil {
			return res, err
		}
		got := &appsv1.Deployment{}
		if err := c.Get(ctx, key, got); err != nil {
			return res, err
		}
		live[d.Name] = got
	}
	// The manager's snapshot must hold the targets' pods before the first
	// judgement: an update of each, judged, must be refused or admitted
	// as the stream expects.
	if err := waitJudged(ctx, c, live); err != nil {
		return res, fmt.Errorf("%w\n%s", err, m.logTail())
	}
	metricsURL := "http://" + m.metricsAddr + "/metrics"
	leadEnd, err := readAPIServerLoad(ctx, cfg)
	if err != nil {
		return res, err
	}
	res.lead = leadEnd.since(leadStart)
	var heapBefore []byte
	if o.admissionCollect || o.admissionAPIServerAllocs != "" {
		if heapBefore, res.collected, err = collectAPIServer(ctx, cfg); err != nil {
			return res, err
		}
	}
	callsBefore, err := readCallSides(ctx, cfg, metricsURL)
	if err != nil {
		return res, err
	}
	machineBefore := readMachineTimes()
	logf("admission: %d updates a second for %s", o.admissionRate, o.admissionFor)
	profiled, traced, apiServerProfiled := make(chan error, 1), make(chan error, 1), make(chan error, 1)
	go func() { profiled <- m.cpuProfile(ctx, o.admissionProfile, o.admissionFor-2*time.Second) }()
	go func() { traced <- m.executionTrace(ctx, o.admissionTrace, o.admissionFor-2*time.Second) }()
	go func() {
		apiServerProfiled <- apiServerCPUProfile(ctx, cfg, o.admissionAPIServerProfile, o.admissionFor-2*time.Second)
	}()
	if err := stream(ctx, cfg, c.Scheme(), live, &res); err != nil {
		return res, fmt.Errorf("%w\n%s", err, m.logTail())
	}
	if err := errors.Join(<-profiled, <-traced, <-apiServerProfiled); err != nil {
		return res, err
	}
	res.machine = readMachineTimes().since(machineBefore)
	callsAfter, err := readCallSides(ctx, cfg, metricsURL)
	if err != nil {
		return res, err
	}
	res.calls = callsAfter.since(callsBefore)
	if o.admissionAPIServerAllocs != "" {
		heapAfter, _, err := collectAPIServer(ctx, cfg)
		if err != nil {
			return res, err
		}
		if err := writeAllocsBetween(o.admissionAPIServerAllocs, heapBefore, heapAfter); err != nil {
			return res, err
		}
	}
	body, err := get(ctx, metricsURL)
	if err != nil {
		return res, err
	}
	res.served = admissionHistograms(body)
	return res, nil
}

// waitJudged sends each judged change once, dry run, until the check
// answers it as the stream expects.
func waitJudged(ctx context.Context, c client.Client, live map[string]*appsv1.Deployment) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, ch := range changes() {
		for {
			obj := live[ch.target].DeepCopy()
			ch.apply(obj)
			err := c.Update(ctx, obj, client.DryRunAll)
			if (err != nil) == ch.refuse && (err == nil || strings.Contains(err.Error(), "RolloutDeadlock")) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("the check never answered %q as expected (last: %v)", ch.name, err)
			case <-time.After(time.Second):
			}
		}
	}
	return nil
}

// stream sends the changes in turn at res.rate a second for res.duration
// from 16 workers, and checks every answer: a judged change refused or
// admitted as expected, an image change admitted, and no warning that a
// judgement ran out of its budget.
func stream(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, live map[string]*appsv1.Deployment, res *admissionResult) error {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 1000, 1000
	warned := &budgetWarnings{}
	cfg.WarningHandler = warned
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	all := changes()
	for _, ch := range all {
		if !slices.Contains(res.order, ch.name) {
			res.order = append(res.order, ch.name)
		}
	}
	var (
		mu    sync.Mutex
		wrong []string
		wg    sync.WaitGroup
	)
	work := make(chan change, res.rate)
	for range 16 {
		wg.Go(func() {
			for ch := range work {
				obj := live[ch.target].DeepCopy()
				ch.apply(obj)
				start := time.Now()
				err := c.Update(ctx, obj, client.DryRunAll)
				took := time.Since(start)
				mu.Lock()
				res.latencies[ch.name] = append(res.latencies[ch.name], took)
				if (err != nil) != ch.refuse || (err != nil && !strings.Contains(err.Error(), "RolloutDeadlock")) {
					wrong = append(wrong, fmt.Sprintf("%s: %v", ch.name, err))
				}
				mu.Unlock()
			}
		})
	}
	var behind atomic.Int32
	tick := time.NewTicker(time.Second / time.Duration(res.rate))
	deadline := time.Now().Add(res.duration)
	for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
		<-tick.C
		select {
		case work <- all[i%len(all)]:
			res.sent++
		default:
			behind.Add(1) // every worker busy: the update is not sent
		}
	}
	tick.Stop()
	close(work)
	wg.Wait()
	res.notSent = behind.Load()
	if len(wrong) > 0 {
		return fmt.Errorf("%d of %d answers were not as expected, the first: %s", len(wrong), res.sent, wrong[0])
	}
	if n := warned.count.Load(); n > 0 {
		return fmt.Errorf("%d judgements ran past the check's budget", n)
	}
	return nil
}

// budgetWarnings counts the warnings saying a judgement ran out of time.
type budgetWarnings struct{ count atomic.Int32 }

func (w *budgetWarnings) HandleWarningHeader(_ int, _ string, text string) {
	if strings.Contains(text, "no answer within") {
		w.count.Add(1)
	}
}

// histogram is one series of the check's duration histogram.
type histogram struct {
	labels string
	count  float64
	// atMost are the cumulative counts by upper bound, in seconds.
	atMost map[float64]float64
}

// describe names the series: mode Off is a change the check did not
// judge.
func (h histogram) describe() string {
	switch {
	case strings.Contains(h.labels, `mode="Off"`):
		return "not judged"
	case strings.Contains(h.labels, `allowed="false"`):
		return "judged, refused"
	}
	return "judged, admitted"
}

// admissionHistograms reads the check's histogram from the manager's
// metrics, one per kind, mode and verdict.
func admissionHistograms(body string) []histogram {
	return histogramsOf(body, "placementguard_admission_duration_seconds")
}

// markdown reports the stream: the client's percentiles by change, and
// the share of the check's own answers within its goals.
func (r admissionResult) markdown() string {
	var b strings.Builder
	where := "sharing every CPU with the API server, etcd and the harness"
	if managerCore >= 0 {
		where = fmt.Sprintf("alone on CPU %d, the API server, etcd and the harness on the others", managerCore)
	}
	fmt.Fprintf(&b, "\nAdmission check: %d dry-run Deployment updates in %s (%d a second asked, %d not sent with every worker busy), the manager in Deny mode, %s\n\n",
		r.sent, r.duration, r.rate, r.notSent, where)
	b.WriteString("| change | answers | p50 | p99 | max |\n|---|---|---|---|---|\n")
	for _, name := range r.order {
		ds := r.latencies[name]
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s |\n", name, len(ds), roundMicros(quantile(ds, 50)), roundMicros(quantile(ds, 99)), roundMicros(quantile(ds, 100)))
	}
	b.WriteString("\nThe check's own time (placementguard_admission_duration_seconds):\n\n| series | answers | ≤ 50 µs | ≤ 100 µs | ≤ 1 ms | ≤ 5 ms | ≤ 10 ms | ≤ 25 ms |\n|---|---|---|---|---|---|---|---|\n")
	for _, h := range r.served {
		fmt.Fprintf(&b, "| %s | %.0f | %s | %s | %s | %s | %s | %s |\n", h.describe(), h.count,
			h.shareWithin(0.00005), h.shareWithin(0.0001), h.shareWithin(0.001), h.shareWithin(0.005), h.shareWithin(0.01), h.shareWithin(0.025))
	}
	b.WriteString(callSidesMarkdown(r.calls))
	b.WriteString(r.machine.markdown("over the stream"))
	fmt.Fprintf(&b, "\nThe API server before the stream, from the check's manager starting: %.1f s of CPU in %.0f s; its collector's cycles: %.0f.\n", r.lead.cpu, r.lead.took.Seconds(), r.lead.gcs)
	if r.collected > 0 {
		fmt.Fprintf(&b, "Then a full collection of the API server, asked for: %s.\n", r.collected.Round(time.Millisecond))
	}
	return b.String()
}

// quantile is the p-th percentile of ds by nearest rank (100: the
// largest), 0 when there is none.
func quantile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	rank := (len(s)*p + 99) / 100
	return s[max(0, min(len(s), rank)-1)]
}

// roundMicros rounds an answer's time to 100 µs, as the report prints it.
func roundMicros(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
