package utils

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/admission"
	"github.com/placement-guard/placement-guard/internal/clusterstate"
	"github.com/placement-guard/placement-guard/internal/controller/setup"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/schedulerprofile"
	"github.com/placement-guard/placement-guard/internal/webhook"
)

// OperatorOptions tune the operator run in-process by tests and the demo.
type OperatorOptions struct {
	// CRDDir holds the CustomResourceDefinitions to install first.
	CRDDir string
	// UnschedulableGrace is the reconciler's grace for Pending pods.
	UnschedulableGrace time.Duration
	// AsUser, when set, is the user the manager impersonates, so that it
	// runs with that user's permissions only (the CRDs are installed with
	// cfg's).
	AsUser string
	// WebhookPort, when set, serves the admission check on
	// 127.0.0.1:WebhookPort in AdmissionMode (Warn when empty), with the
	// certificate in CertDir or, when CertSecret is set, one the manager
	// keeps there as --webhook-cert-secret does: for 127.0.0.1, valid
	// CertValidity, its authority given to WebhookConfiguration.
	WebhookPort          int
	CertDir              string
	AdmissionMode        admission.Mode
	CertSecret           types.NamespacedName
	WebhookConfiguration string
	// MutatingConfiguration is Adopt mode's, told the same authority.
	MutatingConfiguration string
	CertValidity          time.Duration
	// APIServerClientCA, when set, is the authority of the client
	// certificate the API server presents to webhooks, of common name
	// APIServerClientName (localcluster's WebhookClientCA), as
	// --admission-client-ca and --admission-client-names give it: the
	// check judges the API server's requests only.
	APIServerClientCA   string
	APIServerClientName string
	// Unjudged is what Deny does with a change it could not judge
	// (--admission-unjudged).
	Unjudged webhook.Unjudged
	// MetricsAddr, when set, serves the manager's metrics over plain HTTP
	// at that address, as --metrics-secure=false does: where a suite's
	// processes that do not run the operator read them.
	MetricsAddr string
	// SchedulerConfig, when set, is the KubeSchedulerConfiguration the
	// manager predicts with, as --scheduler-config gives it (its
	// default-scheduler profile for a pod that names no scheduler).
	SchedulerConfig string
}

// RunOperator installs the CRDs and runs the operator's manager, as
// cmd/main wires it, in this process against cfg. It returns once the
// manager runs; stop ends it and waits until it has.
func RunOperator(ctx context.Context, cfg *rest.Config, opts OperatorOptions) (stop func() error, err error) {
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{opts.CRDDir}, ErrorIfPathMissing: true}); err != nil {
		return nil, fmt.Errorf("install the CRDs from %s: %w", opts.CRDDir, err)
	}
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), pgv1.AddToScheme(scheme)); err != nil {
		return nil, err
	}
	if opts.AsUser != "" {
		cfg = rest.CopyConfig(cfg)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: opts.AsUser}
	}
	options := ctrl.Options{
		Scheme:                 scheme,
		Cache:                  clusterstate.CacheOptions(),
		Client:                 clusterstate.ClientOptions(),
		Metrics:                metricsserver.Options{BindAddress: cmp.Or(opts.MetricsAddr, "0")},
		HealthProbeBindAddress: "0",
		// A fleet on one machine runs one operator per cluster in this
		// process; their controllers share names.
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	}
	var rotator *webhook.CertRotator
	var apiServer *webhook.APIServerIdentity
	if opts.APIServerClientCA != "" {
		if apiServer, err = webhook.LoadAPIServerIdentity(opts.APIServerClientCA, []string{opts.APIServerClientName}); err != nil {
			return nil, err
		}
	}
	if opts.WebhookPort != 0 {
		server := ctrlwebhook.Options{Host: "127.0.0.1", Port: opts.WebhookPort, CertDir: opts.CertDir}
		if opts.CertSecret.Name != "" {
			c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
			if err != nil {
				return nil, err
			}
			rotator = &webhook.CertRotator{Client: c, Secret: opts.CertSecret, Configuration: opts.WebhookConfiguration,
				MutatingConfiguration: opts.MutatingConfiguration, Hosts: []string{"127.0.0.1"}, Validity: opts.CertValidity, Now: time.Now, Log: ctrl.Log.WithName("webhook-cert")}
			server.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.GetCertificate = rotator.GetCertificate }}
		}
		if apiServer != nil {
			server.TLSOpts = append(server.TLSOpts, apiServer.TLS)
		}
		options.WebhookServer = ctrlwebhook.NewServer(server)
	}
	mgr, err := ctrl.NewManager(cfg, options)
	if err != nil {
		return nil, fmt.Errorf("create the manager: %w", err)
	}
	// Without a webhook the check is Off, and so are its findings, as in
	// a manager that serves none.
	mode := admission.ModeOff
	if opts.WebhookPort != 0 {
		mode = cmp.Or(opts.AdmissionMode, admission.ModeWarn)
	}
	var profiles *placement.Profiles
	if opts.SchedulerConfig != "" {
		if profiles, err = schedulerprofile.Parse([]byte(opts.SchedulerConfig), ""); err != nil {
			return nil, fmt.Errorf("the scheduler configuration: %w", err)
		}
	}
	if _, err := setup.Operator(ctx, mgr, cfg, setup.Options{
		Profiles:           profiles,
		FeedReadInterval:   clusterstate.DefaultFeedReadInterval,
		UnschedulableGrace: opts.UnschedulableGrace,
		Admission: webhook.Options{Mode: mode, Skip: []string{"kube-system"}, Budget: webhook.DefaultBudget,
			Unjudged: opts.Unjudged, APIServer: apiServer},
		Serve:   opts.WebhookPort != 0,
		Rotator: rotator,
	}); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(runCtx) }()
	if !mgr.GetCache().WaitForCacheSync(runCtx) {
		cancel()
		return nil, fmt.Errorf("the operator's caches did not sync: %w", <-done)
	}
	if rotator != nil {
		// Ready as the manager's readiness check says: a certificate held.
		if err := wait.PollUntilContextTimeout(runCtx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return rotator.Ready(nil) == nil, nil
		}); err != nil {
			cancel()
			return nil, fmt.Errorf("the webhook's certificate: %w", errors.Join(err, <-done))
		}
	}
	return func() error {
		cancel()
		return <-done
	}, nil
}
