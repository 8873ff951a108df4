package webhook

import (
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	pgadmission "github.com/placement-guard/placement-guard/internal/admission"
)

// DefaultBudget bounds one judgement: well inside the webhook's timeout,
// so that a slow answer admits the change, with a warning, rather than
// making the API server wait or fail.
const DefaultBudget = 2 * time.Second

// Options configure the check as the manager's flags say.
type Options struct {
	Mode   pgadmission.Mode
	Skip   []string
	Budget time.Duration
	// Operator is the user the operator's own requests come as (OwnUser).
	Operator string
	// MaxJudgements bounds the judgements made at once;
	// DefaultMaxJudgements when 0.
	MaxJudgements int
	// Unjudged is what Deny mode does with a change it could not judge,
	// in a namespace that does not say (Admit when empty).
	Unjudged Unjudged
	// Autoscalers are the users whose writes to the scale subresource no
	// mode refuses (DefaultAutoscalers when nil).
	Autoscalers []string
	// APIServer, when set, knows the API server's requests by their
	// client certificate: requests from anyone else are not judged, and
	// the slots are shared by requesting user. The webhook server's TLS
	// must ask for client certificates (APIServerIdentity.TLS).
	APIServer *APIServerIdentity
}

// The webhook configuration (config/webhook/manifests.yaml). Ignore: a
// check that is down or slow never stops a change; the timeout is well
// above the judgement's budget, which answers first.
// Adopt mode is a mutating webhook beside it, with the same failure policy:
// down, a change is admitted as written and judged as in Warn mode.
// +kubebuilder:webhook:path=/adopt-workloads,mutating=true,failurePolicy=ignore,sideEffects=None,groups=apps,resources=deployments;statefulsets,verbs=create;update,versions=v1,name=adopt.workloads.placementguard.io,admissionReviewVersions=v1,timeoutSeconds=5,reinvocationPolicy=Never
// The check is sent writes to the workloads' scale subresource too
// (kubectl scale, a HorizontalPodAutoscaler), which it judges as in Warn.
// +kubebuilder:webhook:path=/validate-workloads,mutating=false,failurePolicy=ignore,sideEffects=None,groups=apps,resources=deployments;statefulsets;deployments/scale;statefulsets/scale,verbs=create;update,versions=v1,name=workloads.placementguard.io,admissionReviewVersions=v1,timeoutSeconds=5

// Register serves the check at Path, and Adopt mode at AdoptPath, on the
// manager's webhook server, reading namespaces from the manager's cache
// (from the API server for one the cache has not heard of).
func Register(mgr manager.Manager, cluster Cluster, opts Options) {
	maxJudgements := opts.MaxJudgements
	if maxJudgements <= 0 {
		maxJudgements = DefaultMaxJudgements
	}
	v := &Validator{
		Cluster: cluster, Namespaces: mgr.GetCache(), LiveNamespaces: mgr.GetAPIReader(), Decoder: admission.NewDecoder(mgr.GetScheme()),
		Default: opts.Mode, Unjudged: opts.Unjudged, Skip: opts.Skip, Budget: opts.Budget, Operator: opts.Operator,
		Autoscalers: opts.Autoscalers, Judging: NewSlots(maxJudgements),
	}
	mgr.GetWebhookServer().Register(Path, withCaller(opts.APIServer, &webhook.Admission{Handler: v}))
	mgr.GetWebhookServer().Register(AdoptPath, withCaller(opts.APIServer, &webhook.Admission{Handler: &Adopter{Validator: v}}))
}
