// Package webhook serves the admission check of Deployments and
// StatefulSets: it reads the request, finds the mode that applies, asks
// internal/admission, and answers with warnings or a refusal. It has no
// side effects (sideEffects: None): the findings are recorded as Events by
// the operator once a change lands.
package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/trace"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	pgadmission "github.com/placement-guard/placement-guard/internal/admission"
	"github.com/placement-guard/placement-guard/internal/metrics"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"
	"github.com/placement-guard/placement-guard/internal/targets"
)

// Path is where the manager serves the check.
const Path = "/validate-workloads"

// Cluster is what the check reads: the engine's snapshot, kept warm by the
// operator's feeds, a workload as it runs now, and what a change to it is
// judged with.
type Cluster interface {
	// With runs f with the snapshot held still; what f asks stops when
	// ctx ends.
	With(ctx context.Context, f func(*placement.Snapshot) error) error
	// Live is obj as a target, with the pods and revision of the object
	// of that uid as it runs now (none for an object not created yet).
	Live(ctx context.Context, obj client.Object) (*targets.Target, error)
	// Migrations are the namespace's PlacementMigrations. The check asks
	// no pre-flight on the request's path, so it reads no disruption
	// budget nor autoscaler.
	Migrations(ctx context.Context, namespace string) ([]pgv1.PlacementMigration, error)
	// Workload is a workload of the kind as the manager's cache holds it:
	// what a write to its scale subresource changes.
	Workload(ctx context.Context, kind *targets.Kind, namespace, name string) (client.Object, error)
}

// Validator is the admission check.
type Validator struct {
	Cluster Cluster
	// Namespaces reads the namespaces' labels, from the manager's cache;
	// LiveNamespaces from the API server, for a namespace the cache has
	// not heard of yet (created in the same apply as its workloads).
	Namespaces     client.Reader
	LiveNamespaces client.Reader
	Decoder        admission.Decoder
	// Default is the mode of a namespace without the label.
	Default pgadmission.Mode
	// Unjudged is what Deny mode does with a change it could not judge in
	// a namespace without the label AdmissionUnjudgedLabel (Admit when
	// empty).
	Unjudged Unjudged
	// Skip are namespaces never judged: kube-system, the operator's own.
	Skip []string
	// Budget bounds a judgement; a change the engine cannot judge within it
	// is admitted with a warning that says so.
	Budget time.Duration
	// Operator is the user the operator's requests come as (OwnUser). A
	// write under a migration's field manager is exempt only from it: any
	// user may name any field manager.
	Operator string
	// Autoscalers are the users an autoscaler's writes to the scale
	// subresource come as, which no mode refuses (DefaultAutoscalers
	// when nil).
	Autoscalers []string
	// Judging bounds the judgements made at once (none when nil): a
	// request that finds no slot free to it is admitted at once, not
	// judged, and says so, rather than wait behind the others for the
	// snapshot the feeds and reconcilers share.
	Judging *Slots
}

// DefaultMaxJudgements is how many judgements the check makes at once. A
// judgement holds the one snapshot for a few milliseconds, so those past
// the first only queue: 32 absorb the burst of a GitOps sync within the
// budget, and no source may take more than 24 of them.
const DefaultMaxJudgements = 32

// errBusy is a judgement not made because the check is making as many as
// it may.
var errBusy = errors.New("the check is judging as many changes as it may at once")

var _ admission.Handler = &Validator{}

// Handle judges one request.
func (v *Validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	// The region lets an execution trace of the manager (go tool trace,
	// bench-scale's -admission-trace) tell what the check's time was spent
	// on: running, waiting for the CPU, or helping the garbage collector.
	defer trace.StartRegion(ctx, "placementguard/admission").End()
	start := time.Now()
	resp, mode, _ := v.handle(ctx, req)
	metrics.ObserveAdmission(kindLabel(req), string(mode), resp.Allowed, time.Since(start))
	trace.Log(ctx, "mode", string(mode))
	return resp
}

// kindLabel is the request's kind as a metric label: a kind the check
// judges, else "Other". The port answers anyone who reaches it, and a
// label taken from the request would let them grow the registry without
// bound.
func kindLabel(req admission.Request) string {
	if targets.KindNamed(req.Kind.Kind) != nil {
		return req.Kind.Kind
	}
	if k := targets.KindOfResource(req.Resource.Resource); k != nil && req.SubResource == "scale" {
		return string(k.Name)
	}
	return "Other"
}

func (v *Validator) handle(ctx context.Context, req admission.Request) (admission.Response, pgadmission.Mode, string) {
	kind := req.Kind.Kind
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed(""), pgadmission.ModeOff, kind
	}
	if v.skipped(req) {
		return admission.Allowed(""), pgadmission.ModeOff, kind
	}
	if borrowed, ok := v.borrowedManager(req); ok {
		if resp, mode, refused := v.refuseBorrowed(ctx, req, borrowed); refused {
			return resp, mode, kind
		}
	}
	if req.SubResource == "scale" {
		return v.handleScale(ctx, req)
	}
	// The fast path: a workload that certainly carries no hard constraint,
	// or a change that leaves every judged field as it was, is admitted
	// before the objects are decoded.
	newFields, err := readPlacement(req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("read the %s: %w", kind, err)), pgadmission.ModeOff, kind
	}
	if !newFields.mayBeHard() || newFields.admissionLabel == string(pgadmission.ModeOff) {
		return admission.Allowed(""), pgadmission.ModeOff, kind
	}
	if req.Operation == admissionv1.Update {
		if oldFields, err := readPlacement(req.OldObject.Raw); err == nil && unchanged(oldFields, newFields) {
			return admission.Allowed(""), pgadmission.ModeOff, kind
		}
	}
	newObj, newW, err := v.decode(req.Object)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("read the %s: %w", kind, err)), pgadmission.ModeOff, kind
	}
	if newObj.GetLabels()[pgv1.AdmissionLabel] == string(pgadmission.ModeOff) {
		return admission.Allowed(""), pgadmission.ModeOff, kind
	}
	var oldObj client.Object
	var oldW *placement.Workload
	if req.Operation == admissionv1.Update {
		if oldObj, oldW, err = v.decode(req.OldObject); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("read the %s replaced: %w", kind, err)), pgadmission.ModeOff, kind
		}
	}
	if !pgadmission.Relevant(oldW, newW) {
		return admission.Allowed(""), pgadmission.ModeOff, kind
	}
	resp, mode := v.answer(ctx, req, newObj, oldObj, aWrite)
	return resp, mode, kind
}

// changeOf is what kind of change a request makes, which decides what
// Deny may refuse of it.
type changeOf int

const (
	// aWrite is a create or an update of the workload: refused in Deny
	// when it makes the workload worse (noWorse).
	aWrite changeOf = iota
	// aScale is a write to its scale subresource by a person or a
	// pipeline (kubectl scale): refused in Deny when it leaves more of the
	// workload's replicas unplaceable than before.
	aScale
	// anAutoscale is an autoscaler's write to its scale subresource:
	// never refused, so that autoscaling never stops; its findings are
	// warnings and Events.
	anAutoscale
)

// answer judges newObj, replacing oldObj (nil for a create), in the
// namespace's mode, as the kind of change it is.
func (v *Validator) answer(ctx context.Context, req admission.Request, newObj, oldObj client.Object, change changeOf) (admission.Response, pgadmission.Mode) {
	warnOnly := change == anAutoscale
	kind := kindLabel(req)
	policy, err := v.policy(ctx, req.Namespace)
	mode := policy.mode
	namespaceLabel := req.Namespace
	if err != nil {
		// A namespace the API server does not know either is judged in
		// the default mode, not let through unjudged.
		logf.FromContext(ctx).Info("Judging in the default mode", "namespace", req.Namespace, "reason", err.Error())
		// Nor is it a metric label: a request names any namespace it likes.
		namespaceLabel = ""
	}
	if mode == pgadmission.ModeOff {
		return admission.Allowed(""), pgadmission.ModeOff
	}
	var before *corev1.PodSpec
	if oldObj != nil {
		before = &targets.TemplateOf(oldObj).Spec
	}
	h := callerOf(ctx).holderFor(req.UserInfo.Username)
	// In Deny, what an unsatisfiable workload's change does to it is
	// weighed by how many of its replicas can be placed (noWorse).
	weigh := mode == pgadmission.ModeDeny && !warnOnly && oldObj != nil
	after, err := v.judge(ctx, h, newObj, before, weigh)
	if err != nil {
		return v.unjudged(ctx, req, policy, warnOnly, err), mode
	}
	findings := after.Findings
	for _, f := range findings {
		metrics.CountFinding(namespaceLabel, kind, f.Type, string(mode))
	}
	warnings := pgadmission.Warnings(findings)
	if manager, ok := v.borrowedManager(req); ok {
		warnings = append([]string{borrowedWarning(req, manager)}, warnings...)
	}
	if mode != pgadmission.ModeDeny || warnOnly || !after.Blocking() {
		return admission.Allowed("").WithWarnings(warnings...), mode
	}
	if oldObj != nil {
		if why, noWorse := v.noWorse(ctx, h, oldObj, newObj, after, change); noWorse {
			return admission.Allowed("").WithWarnings(append(warnings, why)...), mode
		}
	}
	return deny(warnings), mode
}

// noWorse reports a change that leaves a workload no worse than it was:
// every blocking finding of the workload as the change leaves it was
// found of the same whole constraint as it was, no more of its replicas
// are left unplaceable, and the change adds no replicas
// (pgadmission.Worse). Deny refuses only what a change makes worse, so
// that the remedy of a workload that is already unsatisfiable (fewer
// replicas, a strategy fixed, a rollback) is never refused. why says so,
// for a warning.
func (v *Validator) noWorse(ctx context.Context, h holder, oldObj, newObj client.Object, after pgadmission.Judgement, change changeOf) (why string, noWorse bool) {
	before, err := v.judge(ctx, h, oldObj, &targets.TemplateOf(oldObj).Spec, true)
	if err != nil {
		return "", false
	}
	if change == aScale {
		if len(pgadmission.LeavesMoreUnplaced(before, after)) > 0 {
			return "", false
		}
		return pgadmission.ClipWarning(fmt.Sprintf("placement-guard: admitted in Deny: the scale leaves no more replicas unplaceable than the %d before it", before.Unplaced)), true
	}
	oldW, newW := targets.WorkloadOf(oldObj), targets.WorkloadOf(newObj)
	if len(pgadmission.Worse(before, after, newW.Replicas > oldW.Replicas)) > 0 {
		return "", false
	}
	return pgadmission.ClipWarning("placement-guard: admitted in Deny: the workload was already so before this change, which leaves it no worse; a change that adds to it is refused"), true
}

// skipped reports requests never judged: system and own namespaces, and
// a migration's own writes, which the migration judged before it made
// them.
func (v *Validator) skipped(req admission.Request) bool {
	for _, ns := range v.Skip {
		if req.Namespace == ns {
			return true
		}
	}
	return v.ownWrite(req)
}

// decode reads a workload object of the request.
func (v *Validator) decode(raw runtime.RawExtension) (client.Object, *placement.Workload, error) {
	if len(raw.Raw) == 0 {
		return nil, nil, errors.New("the request carries no object")
	}
	obj, err := targets.NewObjectFor(raw.Raw)
	if err != nil {
		return nil, nil, err
	}
	if err := v.Decoder.DecodeRaw(raw, obj); err != nil {
		return nil, nil, err
	}
	w := targets.WorkloadOf(obj)
	if w == nil {
		return nil, nil, fmt.Errorf("%T is not a workload placement-guard judges", obj)
	}
	return obj, w, nil
}

// judge asks the one question, within the budget, about the workload as
// the change leaves it; before is the pod spec it replaces (nil for a
// create). With weigh, a workload with a blocking finding has its
// unplaceable replicas counted too, for noWorse.
func (v *Validator) judge(ctx context.Context, h holder, obj client.Object, before *corev1.PodSpec, weigh bool) (pgadmission.Judgement, error) {
	if v.Judging != nil {
		if !v.Judging.take(h) {
			metrics.CountUnjudged("busy")
			return pgadmission.Judgement{}, errBusy
		}
		defer v.Judging.give(h)
	}
	if v.Budget > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, v.Budget)
		defer cancel()
	}
	ch, err := v.change(ctx, obj, before)
	if err != nil {
		return pgadmission.Judgement{}, err
	}
	// The engine stops at the budget's end, and so does the wait for the
	// snapshot: nothing of this judgement runs on after its answer.
	j := pgadmission.Judgement{Replicas: ch.Target.Workload.Replicas}
	err = v.Cluster.With(ctx, func(snap *placement.Snapshot) error {
		var err error
		if j.Findings, err = pgadmission.Judge(snap, ch); err != nil || !weigh || !j.Blocking() {
			return err
		}
		j.Unplaced, err = pgadmission.Unplaced(snap, ch)
		return err
	})
	if errors.Is(err, placement.ErrInterrupted) {
		metrics.CountUnjudged("budget")
		return pgadmission.Judgement{}, fmt.Errorf("no answer within %s", v.Budget)
	}
	return j, err
}

// change is the request's change with what it is judged with.
func (v *Validator) change(ctx context.Context, obj client.Object, before *corev1.PodSpec) (planning.Change, error) {
	t, err := v.Cluster.Live(ctx, obj)
	if err != nil {
		return planning.Change{}, err
	}
	migrations, err := v.Cluster.Migrations(ctx, obj.GetNamespace())
	if err != nil {
		return planning.Change{}, err
	}
	return planning.Change{Target: t, Before: before, Migrations: migrations}, nil
}

// deny refuses a change with the findings' words: kubectl, Helm and the
// GitOps tools print the message of a refusal.
func deny(warnings []string) admission.Response {
	resp := admission.Denied("placement-guard: " + strings.Join(warnings, " | "))
	resp.Result.Code = http.StatusForbidden
	return resp
}
