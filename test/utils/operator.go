package utils

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/controller"
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
	// WebhookPort and CertDir, when set, serve the admission check on
	// 127.0.0.1:WebhookPort with the certificate in CertDir, in
	// AdmissionMode (Warn when empty).
	WebhookPort   int
	CertDir       string
	AdmissionMode webhook.Mode
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
		Cache:                  controller.CacheOptions(),
		Client:                 controller.ClientOptions(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	}
	if opts.CertDir != "" {
		options.WebhookServer = ctrlwebhook.NewServer(ctrlwebhook.Options{Host: "127.0.0.1", Port: opts.WebhookPort, CertDir: opts.CertDir})
	}
	mgr, err := ctrl.NewManager(cfg, options)
	if err != nil {
		return nil, fmt.Errorf("create the manager: %w", err)
	}
	reconciler := &controller.PlacementMigrationReconciler{
		Client:             mgr.GetClient(),
		APIReader:          mgr.GetAPIReader(),
		Scheme:             mgr.GetScheme(),
		Recorder:           mgr.GetEventRecorder("placement-guard"),
		UnschedulableGrace: opts.UnschedulableGrace,
		FeedReadInterval:   controller.DefaultFeedReadInterval,
	}
	if err := reconciler.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up the reconciler: %w", err)
	}
	if opts.CertDir != "" {
		mode := opts.AdmissionMode
		if mode == "" {
			mode = webhook.ModeWarn
		}
		webhook.Register(mgr, reconciler.AdmissionCluster(), webhook.Options{Mode: mode, Skip: []string{"kube-system"}, Budget: webhook.DefaultBudget})
		if err := (&controller.FindingsReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("placement-guard"),
			Cluster: reconciler.AdmissionCluster(), Skip: []string{"kube-system"}}).SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("set up the admission findings: %w", err)
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(runCtx) }()
	if !mgr.GetCache().WaitForCacheSync(runCtx) {
		cancel()
		return nil, fmt.Errorf("the operator's caches did not sync: %w", <-done)
	}
	return func() error {
		cancel()
		return <-done
	}, nil
}
