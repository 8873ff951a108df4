// Command manager runs the placement-guard operator: it parses the flags
// and wires the feeds, the engine's snapshot, the reconcilers, the
// admission webhook and its certificate into one controller-runtime
// manager. Everything it starts is built in internal/; nothing is decided
// here.
package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/admission"
	"github.com/placement-guard/placement-guard/internal/clusterstate"
	"github.com/placement-guard/placement-guard/internal/controller"
	"github.com/placement-guard/placement-guard/internal/controller/setup"
	"github.com/placement-guard/placement-guard/internal/leadership"
	"github.com/placement-guard/placement-guard/internal/memlimit"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/schedulerprofile"
	"github.com/placement-guard/placement-guard/internal/webhook"

	// Registers placement-guard's metrics with the manager's registry.
	_ "github.com/placement-guard/placement-guard/internal/metrics"
)

var scheme = runtime.NewScheme()

// Leader election timing, controller-runtime's defaults made explicit
// because the write fence holds for the renew deadline.
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
)

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(pgv1.AddToScheme(scheme))
}

func main() {
	var (
		metricsAddr    string
		probeAddr      string
		leaderElect    bool
		secureMetrics  bool
		enableHTTP2    bool
		leaderElectNS  string
		grace          time.Duration
		budgetWrites   int
		budgetWindow   time.Duration
		memoryRatio    float64
		gcPercent      int
		pprofAddr      string
		feedRead       time.Duration
		admissionMode  string
		webhookPort    int
		webhookHost    string
		certPath       string
		certName       string
		certKey        string
		skipNS         string
		certSecret     string
		webhookConfig  string
		mutatingConfig string
		certHosts      string
		certValidity   time.Duration
		maxJudgements  int
		budget         time.Duration
		schedConfig    string
		schedName      string
		unjudged       string
		clientCA       string
		clientNames    string
		autoscalers    string
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8443", "The address the metrics endpoint binds to; \"0\" disables it.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "The address the health and readiness probes bind to.")
	flag.BoolVar(&leaderElect, "leader-elect", true, "Elect a leader so that only one replica acts at a time.")
	flag.StringVar(&leaderElectNS, "leader-election-namespace", "", "Namespace of the leader election lease; the pod's namespace when empty.")
	flag.BoolVar(&secureMetrics, "metrics-secure", true, "Serve metrics over HTTPS, authenticated and authorized by the API server.")
	flag.BoolVar(&enableHTTP2, "enable-http2", false, "Serve metrics over HTTP/2 as well (off because of CVE-2023-44487 and CVE-2023-39325).")
	flag.DurationVar(&grace, "unschedulable-grace", controller.DefaultUnschedulableGrace, "How long a target pod may stay Pending because of the migration's constraint before the stage is rolled back.")
	defaults := controller.DefaultWriteBudget()
	flag.IntVar(&budgetWrites, "write-budget", defaults.Max, "How many times any workload may be written, by all migrations together, within --write-budget-window; a migration that would exceed it stalls (WriteBudgetExceeded).")
	flag.DurationVar(&budgetWindow, "write-budget-window", defaults.Window, "The window of --write-budget.")
	flag.StringVar(&pprofAddr, "pprof-bind-address", "", "The address Go's profiles (/debug/pprof) are served on, without authentication; off when empty. For measurements, never on a shared network.")
	flag.DurationVar(&feedRead, "feed-read-interval", clusterstate.DefaultFeedReadInterval, "While every migration is settled, read the pod and node watches at most this often, taking in every event of the interval at one wake-up: less than half the CPU that pod churn and node heartbeats cost. While a migration is at work, and while a list streams, events are read as they arrive; a migration going to work waits one interval, once, for the events held back. 0 reads each event as it arrives, always.")
	flag.Float64Var(&memoryRatio, "memory-limit-ratio", 0.9, "The share of the container's memory limit set as the Go runtime's soft memory limit, at most the limit less 48 MiB for what the runtime does not count (0 leaves it unset; GOMEMLIMIT in the environment wins).")
	flag.IntVar(&gcPercent, "gc-percent", defaultGCPercent, "The garbage collector's target (GOGC): how far the heap grows past the live heap before a collection. The live heap is mostly the manager's steady index of the cluster, and each judgement of the admission check allocates a burst; a collection that begins during one makes it help mark the whole index (judgements above 10 ms on a 150,000-pod cluster were all such). The default of 200 halves how often that happens and the help asked, for a heap up to three times the live one, still bounded by the memory limit. 0 keeps Go's 100; GOGC in the environment wins.")
	opts := zap.Options{Development: false}
	flag.StringVar(&admissionMode, "admission-mode", string(admission.ModeWarn), "What the admission check of Deployments and StatefulSets does with a change that would strand pods or deadlock its rollout: Warn (admit it with warnings), Deny (refuse it with the same words), Adopt (admit the hard constraints it adds in their soft form, for a PlacementMigration the operator makes to harden once safe) or Off; a namespace's placementguard.io/admission label overrides it.")
	flag.IntVar(&webhookPort, "webhook-port", 9443, "The port the admission webhook is served on.")
	flag.StringVar(&webhookHost, "webhook-host", "", "The address the admission webhook is served on; every interface when empty. 127.0.0.1 for a manager run outside the cluster beside a local API server.")
	flag.StringVar(&certPath, "webhook-cert-path", "", "The directory of the webhook's serving certificate and key (watched and reloaded when they change); controller-runtime's default directory when empty.")
	flag.StringVar(&certName, "webhook-cert-name", "tls.crt", "The webhook certificate's file name.")
	flag.StringVar(&certKey, "webhook-cert-key", "tls.key", "The webhook key's file name.")
	flag.StringVar(&certSecret, "webhook-cert-secret", "", "The Secret (NAME in the manager's namespace, or NAMESPACE/NAME) in which the manager keeps the webhook's serving certificate and the authority that signs it, renewing them itself; the certificate is served from memory and --webhook-cert-path is not read. Empty: the certificate is in --webhook-cert-path, kept by someone else (cert-manager).")
	flag.StringVar(&webhookConfig, "webhook-configuration", "placement-guard-validating-webhook-configuration", "The ValidatingWebhookConfiguration whose caBundle the manager keeps, with --webhook-cert-secret.")
	flag.StringVar(&mutatingConfig, "mutating-webhook-configuration", "placement-guard-mutating-webhook-configuration", "The MutatingWebhookConfiguration of Adopt mode whose caBundle the manager keeps, with --webhook-cert-secret; empty when Adopt mode is not installed.")
	flag.StringVar(&certHosts, "webhook-cert-hosts", "", "Comma-separated DNS names and IP addresses the serving certificate is for, with --webhook-cert-secret: the webhook Service's name.namespace.svc in a cluster.")
	flag.DurationVar(&certValidity, "webhook-cert-validity", webhook.DefaultCertValidity, "A serving certificate's life, with --webhook-cert-secret; the authority lives ten of them, and each is renewed in its last third.")
	flag.DurationVar(&budget, "admission-budget", webhook.DefaultBudget, "How long the admission check may take to judge a change before it admits it with a warning that it was not judged: well inside the webhook configuration's timeoutSeconds (two fifths of it), so that the check answers before the API server gives up on it.")
	flag.IntVar(&maxJudgements, "admission-max-judgements", webhook.DefaultMaxJudgements, "How many changes the admission check judges at once; a change that finds them all taken is admitted at once with a warning that it was not judged (placementguard_admission_unjudged_total{reason=\"busy\"}), never queued.")
	flag.StringVar(&unjudged, "admission-unjudged", string(webhook.UnjudgedAdmit), "What Deny mode does with a change the admission check could not judge (it was judging as many as --admission-max-judgements allows, or ran out of --admission-budget): Admit it with a warning, or Refuse it, saying why; a namespace's placementguard.io/admission-unjudged label overrides it. Refuse keeps Deny whole under any load, at the cost of refusing writes the check had no time for (docs/operations.md).")
	flag.StringVar(&clientCA, "admission-client-ca", "", "A PEM file of the authority that signs the client certificate the API server presents to admission webhooks (its --admission-control-config-file's kubeConfigFile). The check then judges the API server's requests only, answers anyone else at once, and shares its judgements among the users that send the writes: a flood sent straight to its port cannot take the API server's place. Empty: every caller is judged, known by its address.")
	flag.StringVar(&clientNames, "admission-client-names", "", "Comma-separated common names the API server's client certificate may have, with --admission-client-ca; any certificate the authority signs when empty.")
	flag.StringVar(&autoscalers, "admission-autoscalers", strings.Join(webhook.DefaultAutoscalers, ","), "Comma-separated users whose writes to a workload's scale subresource are autoscaling, which no mode refuses (a HorizontalPodAutoscaler's writes come as the controller manager or its horizontal-pod-autoscaler ServiceAccount). In Deny, anyone else's scale that leaves more replicas unplaceable than before is refused.")
	flag.StringVar(&skipNS, "admission-skip-namespaces", "kube-system", "Comma-separated namespaces whose workloads the admission check never judges; the operator's own namespace is always skipped.")
	flag.StringVar(&schedConfig, "scheduler-config", "", "The KubeSchedulerConfiguration file the cluster's kube-scheduler runs (kubescheduler.config.k8s.io/v1), read whole: each pod is filtered and scored with the profile its spec.schedulerName names (its plugins, weights and arguments, skipping the filters it turns off), and pods naming a scheduler it does not describe are said to be unpredicted (UnknownScheduler). Empty: kube-scheduler's default profile alone. What the engine cannot predict as the scheduler would (an out-of-tree plugin, an extender, a preFilter turned off) is refused when the configuration has it everywhere or in the --scheduler-name profile, and the manager does not start; in another profile it makes that profile's pods unpredicted.")
	flag.StringVar(&schedName, "scheduler-name", "default-scheduler", "The profile of --scheduler-config for a pod that names no scheduler; every other pod is predicted with the profile its schedulerName names.")
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	mode, err := admission.ParseMode(admissionMode)
	if err != nil {
		fmt.Fprintln(os.Stderr, "--admission-mode:", err)
		os.Exit(2)
	}
	unjudgedChanges, err := webhook.ParseUnjudged(unjudged)
	if err != nil {
		fmt.Fprintln(os.Stderr, "--admission-unjudged:", err)
		os.Exit(2)
	}
	var apiServer *webhook.APIServerIdentity
	if clientCA != "" {
		if apiServer, err = webhook.LoadAPIServerIdentity(clientCA, commaList(clientNames)); err != nil {
			fmt.Fprintln(os.Stderr, "--admission-client-ca:", err)
			os.Exit(2)
		}
	}
	if budget <= 0 {
		fmt.Fprintln(os.Stderr, "--admission-budget: must be positive")
		os.Exit(2)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	// Read before anything starts: a configuration the engine cannot
	// predict with stops the manager here.
	profiles := schedulerProfiles(schedConfig, schedName)
	log := ctrl.Log.WithName("setup")
	setMemoryLimit(log, memoryRatio)
	setGCPercent(log, gcPercent)

	var tlsOpts []func(*tls.Config)
	if !enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	metricsOpts := metricsserver.Options{
		BindAddress:   metricsAddr,
		SecureServing: secureMetrics,
		TLSOpts:       tlsOpts,
	}
	if secureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}

	cfg := ctrl.GetConfigOrDie()
	// The API server gzips what it sends a client that accepts it, watch
	// events too: each node heartbeat would cost a decompression, several
	// times its decoding. In the cluster's network the bytes are cheap.
	cfg.DisableCompression = true
	options := ctrl.Options{
		Scheme:                 scheme,
		Cache:                  clusterstate.CacheOptions(),
		Client:                 clusterstate.ClientOptions(),
		Metrics:                metricsOpts,
		HealthProbeBindAddress: probeAddr,
		PprofBindAddress:       pprofAddr,
		LeaderElection:         leaderElect,
		LeaseDuration:          ptr.To(leaseDuration),
		RenewDeadline:          ptr.To(renewDeadline),
		RetryPeriod:            ptr.To(retryPeriod),
	}
	// The admission check is served where a serving certificate is given or
	// kept: the webhook configuration that sends requests to it is
	// installed with it (docs/operations.md, "The admission check").
	var rotator *webhook.CertRotator
	if certSecret != "" {
		if rotator, err = certRotator(cfg, certSecret, webhookConfig, mutatingConfig, certHosts, certValidity); err != nil {
			fmt.Fprintln(os.Stderr, "--webhook-cert-secret:", err)
			os.Exit(2)
		}
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.GetCertificate = rotator.GetCertificate })
	}
	serveAdmission := certPath != "" || rotator != nil
	if serveAdmission {
		webhookTLS := tlsOpts
		if apiServer != nil {
			webhookTLS = append(webhookTLS, apiServer.TLS)
		}
		options.WebhookServer = ctrlwebhook.NewServer(ctrlwebhook.Options{
			Host: webhookHost, Port: webhookPort, CertDir: certPath, CertName: certName, KeyName: certKey, TLSOpts: webhookTLS,
		})
	}
	if leaderElect {
		// A replica frozen while it led must not write when it thaws: every
		// write of the manager's client waits for a fresh lease.
		lease, err := leadership.NewLock(cfg, leaderElectNS, "placement-guard.placementguard.io", renewDeadline)
		if err != nil {
			log.Error(err, "Unable to set up leader election")
			os.Exit(1)
		}
		options.LeaderElectionResourceLockInterface = lease
		options.NewClient = func(config *rest.Config, o client.Options) (client.Client, error) {
			c, err := client.New(config, o)
			if err != nil {
				return nil, err
			}
			return leadership.Fence(c, lease.Held), nil
		}
	}
	mgr, err := ctrl.NewManager(cfg, options)
	if err != nil {
		log.Error(err, "Unable to create the manager")
		os.Exit(1)
	}
	if rotator != nil {
		rotator.Log = ctrl.Log.WithName("webhook-cert")
	}
	ctx := ctrl.SetupSignalHandler()
	if _, err := setup.Operator(ctx, mgr, cfg, setup.Options{
		FeedReadInterval:   feedRead,
		Profiles:           profiles,
		UnschedulableGrace: grace,
		WriteBudget:        &controller.WriteBudget{Max: budgetWrites, Window: budgetWindow},
		Admission: webhook.Options{Mode: mode, Skip: skippedNamespaces(skipNS), Budget: budget, MaxJudgements: maxJudgements,
			Unjudged: unjudgedChanges, APIServer: apiServer, Autoscalers: commaList(autoscalers)},
		Serve:   serveAdmission,
		Rotator: rotator,
	}); err != nil {
		log.Error(err, "Unable to set up the operator")
		os.Exit(1)
	}
	if !serveAdmission {
		log.Info("The admission check is not served: neither --webhook-cert-secret nor --webhook-cert-path")
	}
	log.Info("Starting the manager")
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "The manager stopped with an error")
		os.Exit(1)
	}
}

// certRotator keeps the webhook's certificate in secret (NAME or
// NAMESPACE/NAME), reading and writing it with a client of its own: no
// cache of every Secret, no leader's fence, as every replica serves.
func certRotator(cfg *rest.Config, secret, configuration, mutating, hosts string, validity time.Duration) (*webhook.CertRotator, error) {
	key := types.NamespacedName{Name: secret}
	if ns, name, ok := strings.Cut(secret, "/"); ok {
		key = types.NamespacedName{Namespace: ns, Name: name}
	} else if key.Namespace = ownNamespace(); key.Namespace == "" {
		return nil, errors.New("outside a pod the Secret needs a namespace: NAMESPACE/NAME")
	}
	var hostList []string
	for _, h := range strings.Split(hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hostList = append(hostList, h)
		}
	}
	if len(hostList) == 0 {
		return nil, errors.New("--webhook-cert-hosts names no host for the certificate")
	}
	if validity < time.Minute {
		return nil, fmt.Errorf("--webhook-cert-validity %s is under a minute", validity)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	return &webhook.CertRotator{Client: c, Secret: key, Configuration: configuration, MutatingConfiguration: mutating, Hosts: hostList, Validity: validity, Now: time.Now}, nil
}

// ownNamespace is the manager's namespace: its ServiceAccount's, else
// POD_NAMESPACE's; "" outside a pod.
func ownNamespace() string {
	if own, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
		return strings.TrimSpace(string(own))
	}
	return os.Getenv("POD_NAMESPACE")
}

// commaList is a flag's comma-separated values, blanks left out.
func commaList(flagValue string) []string {
	var out []string
	for _, v := range strings.Split(flagValue, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// skippedNamespaces are the namespaces the admission check never judges:
// those of the flag and the operator's own, read from its ServiceAccount.
func skippedNamespaces(flagValue string) []string {
	out := commaList(flagValue)
	if own := ownNamespace(); own != "" {
		out = append(out, own)
	}
	return out
}

// defaultGCPercent is --gc-percent's default.
const defaultGCPercent = 200

// setGCPercent sets the garbage collector's target, unless GOGC does.
func setGCPercent(log logr.Logger, percent int) {
	if env := os.Getenv("GOGC"); env != "" {
		log.Info("Go garbage collector target", "percent", env, "reason", "GOGC is set in the environment")
		return
	}
	if percent <= 0 {
		return
	}
	debug.SetGCPercent(percent)
	log.Info("Go garbage collector target", "percent", percent, "reason", "--gc-percent")
}

// setMemoryLimit sets the runtime's soft memory limit below the
// container's, so the garbage collector reclaims before the kernel kills.
func setMemoryLimit(log logr.Logger, ratio float64) {
	d, err := memlimit.Decide(ratio, os.Getenv("GOMEMLIMIT"), os.DirFS("/sys/fs/cgroup"))
	if err != nil {
		log.Error(err, "Unable to set the Go runtime's memory limit")
		os.Exit(1)
	}
	if d.Limit > 0 {
		debug.SetMemoryLimit(d.Limit)
	}
	log.Info("Go runtime memory limit", "bytes", debug.SetMemoryLimit(-1), "reason", d.Reason)
}

// schedulerProfiles are the profiles --scheduler-config describes, or
// the default one; a configuration the engine cannot predict with ends
// the manager before it starts.
func schedulerProfiles(file, fallback string) *placement.Profiles {
	if file == "" {
		return placement.DefaultProfiles()
	}
	profiles, err := schedulerprofile.Load(file, fallback)
	if err != nil {
		fmt.Fprintln(os.Stderr, "--scheduler-config:", err)
		os.Exit(2)
	}
	ctrl.Log.WithName("setup").Info("Predicting each pod with the cluster's scheduler profile it names", "profiles", profiles.Names(), "unpredictable", profiles.UnpredictableNames(), "fallback", profiles.Fallback().Name, "config", file)
	return profiles
}
