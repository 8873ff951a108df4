// Package setup builds the operator's parts into a controller-runtime
// manager: the engine's view of the cluster, the reconcilers, the
// admission check and the readiness checks. cmd/main.go calls it with what
// its flags say, and the tests and the demo with theirs, so that a part
// added here runs in both.
package setup

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/placement-guard/placement-guard/internal/admission"
	"github.com/placement-guard/placement-guard/internal/clusterstate"
	"github.com/placement-guard/placement-guard/internal/clusterview"
	"github.com/placement-guard/placement-guard/internal/controller"
	"github.com/placement-guard/placement-guard/internal/controller/adopt"
	"github.com/placement-guard/placement-guard/internal/controller/findings"
	"github.com/placement-guard/placement-guard/internal/controller/namespacemode"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/webhook"
)

// EventSource is the name the operator's Events are recorded under.
const EventSource = "placement-guard"

// Options are what the manager's flags decide.
type Options struct {
	// FeedReadInterval paces the pod and node feeds while every migration
	// is settled (clusterstate.DefaultFeedReadInterval).
	FeedReadInterval time.Duration
	// Profiles are the scheduler profiles the engine predicts with, each
	// pod with the one it names; nil for kube-scheduler's default alone.
	Profiles *placement.Profiles
	// UnschedulableGrace and WriteBudget tune the migrations' reconciler;
	// a nil budget is the default one.
	UnschedulableGrace time.Duration
	WriteBudget        *controller.WriteBudget
	// Admission is the admission check's configuration. Its mode Off
	// leaves the findings unrecorded; the check itself is served only with
	// Serve, on the manager's webhook server.
	Admission webhook.Options
	Serve     bool
	// Rotator, when set, keeps the webhook's serving certificate and the
	// configurations' caBundle; the manager is ready once it holds one.
	Rotator *webhook.CertRotator
	// FindingsBudget bounds one judgement of a change that landed
	// (findings.DefaultBudget when 0).
	FindingsBudget time.Duration
}

// Parts are what Operator built that its caller may read.
type Parts struct {
	State   *clusterstate.ClusterState
	Feeds   clusterstate.Feeds
	Cluster clusterview.View
}

// Operator adds the operator's parts to mgr, whose client the caller
// built (with the leader's write fence, or impersonating a user in a
// test). cfg is the manager's configuration: the admission check asks the
// API server with it who the operator's writes come as.
func Operator(ctx context.Context, mgr manager.Manager, cfg *rest.Config, o Options) (Parts, error) {
	state, feeds, err := clusterstate.Setup(mgr, o.FeedReadInterval)
	if err != nil {
		return Parts{}, fmt.Errorf("set up the cluster state: %w", err)
	}
	if o.Profiles != nil {
		state.UseProfiles(o.Profiles)
	}
	reconciler := &controller.PlacementMigrationReconciler{
		Client:             mgr.GetClient(),
		APIReader:          mgr.GetAPIReader(),
		Scheme:             mgr.GetScheme(),
		Recorder:           mgr.GetEventRecorder(EventSource),
		UnschedulableGrace: o.UnschedulableGrace,
		Budget:             o.WriteBudget,
		State:              state,
		Feeds:              feeds,
	}
	if err := reconciler.SetupWithManager(mgr); err != nil {
		return Parts{}, fmt.Errorf("set up the PlacementMigration controller: %w", err)
	}
	// The admission check's view, built from the same cluster state, warm
	// on every replica, leader or not.
	cluster := clusterview.View{Reader: mgr.GetClient(), State: state, Feeds: feeds}
	if err := cluster.Warm(ctx, mgr.GetCache()); err != nil {
		return Parts{}, fmt.Errorf("set up the admission check's cache: %w", err)
	}
	if err := admissionCheck(ctx, mgr, cfg, cluster, o); err != nil {
		return Parts{}, err
	}
	if err := reconcilers(mgr, cluster, o); err != nil {
		return Parts{}, err
	}
	if err := readiness(mgr, cluster); err != nil {
		return Parts{}, err
	}
	return Parts{State: state, Feeds: feeds, Cluster: cluster}, nil
}

// admissionCheck serves the check and keeps its certificate, when asked.
func admissionCheck(ctx context.Context, mgr manager.Manager, cfg *rest.Config, cluster clusterview.View, o Options) error {
	if o.Serve {
		// The check exempts the migrations' own writes by the user they
		// come as, which only the API server can tell.
		operator, err := webhook.OwnUser(ctx, cfg)
		if err != nil {
			return fmt.Errorf("set up the admission check: %w", err)
		}
		mgr.GetLogger().WithName("setup").Info("The admission check exempts the migrations' writes from this user only", "user", operator)
		opts := o.Admission
		opts.Operator = operator
		webhook.Register(mgr, cluster, opts)
		if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
			return fmt.Errorf("set up the webhook's readiness check: %w", err)
		}
	}
	if o.Rotator == nil {
		return nil
	}
	o.Rotator.Recorder = mgr.GetEventRecorder(EventSource)
	if err := mgr.Add(o.Rotator); err != nil {
		return fmt.Errorf("set up the webhook's certificate: %w", err)
	}
	if err := mgr.AddReadyzCheck("webhook-cert", o.Rotator.Ready); err != nil {
		return fmt.Errorf("set up the webhook certificate's readiness check: %w", err)
	}
	return nil
}

// reconcilers sets up the reconcilers beside the migrations': the
// admission check's findings, the namespaces' modes and adoption.
func reconcilers(mgr manager.Manager, cluster clusterview.View, o Options) error {
	if o.Admission.Mode != admission.ModeOff {
		r := &findings.Reconciler{Client: mgr.GetClient(), Events: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder(EventSource),
			Cluster: cluster, Skip: o.Admission.Skip, Budget: o.FindingsBudget}
		if err := r.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("set up the admission findings controller: %w", err)
		}
	}
	if err := (&namespacemode.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(EventSource)}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the namespace mode controller: %w", err)
	}
	if err := (&adopt.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder(EventSource)}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the adoption controller: %w", err)
	}
	return nil
}

// readiness adds the health check, and the readiness check that waits
// for the engine to know the cluster: a replica judges nothing, and acts
// on nothing, from an empty snapshot.
func readiness(mgr manager.Manager, cluster clusterview.View) error {
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("set up the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("synced", func(*http.Request) error {
		if !cluster.Synced() {
			return errors.New("the pod and node feeds have not taken in their first list")
		}
		return nil
	}); err != nil {
		return fmt.Errorf("set up the readiness check: %w", err)
	}
	return nil
}
