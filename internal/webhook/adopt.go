package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	pgadmission "github.com/placement-guard/placement-guard/internal/admission"
	"github.com/placement-guard/placement-guard/internal/adoption"
	"github.com/placement-guard/placement-guard/internal/metrics"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// AdoptPath is where the manager serves Adopt mode: a mutating webhook
// that admits the hard constraints a change adds in their soft form.
const AdoptPath = "/adopt-workloads"

// Adopter is Adopt mode. In a namespace whose mode is Adopt, every
// required anti-affinity term and DoNotSchedule spread a change adds is
// admitted in its soft form and recorded on the workload (the adoption
// annotation), from which the operator makes a PlacementMigration, owned by
// the workload, that hardens it once it is safe. Its answer depends on the
// request alone, so a server-side dry run of the same manifest is always
// answered the same. In every other mode it changes nothing.
type Adopter struct {
	// Validator gives the namespaces' modes, what is never judged, and the
	// judgement of the hard form, whose findings explain why it waits.
	Validator *Validator
}

var _ admission.Handler = &Adopter{}

// Handle answers one request.
func (a *Adopter) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	resp, adopted := a.handle(ctx, req)
	mode := pgadmission.ModeOff
	if adopted {
		mode = pgadmission.ModeAdopt
	}
	metrics.ObserveAdmission(kindLabel(req), string(mode), resp.Allowed, time.Since(start))
	return resp
}

// mayAdopt reports whether a write may have something to adopt or to let
// go of. A workload that carries no hard constraint and no record of one
// adopted before has neither; nor has a write that changes no placement
// field, unless it is by the author of an adopted constraint, whose
// manifest applied again without it changes nothing either (the soft form
// belongs to no manager and stays) and is how it lets go. A write that
// takes an adopted constraint away (a rollback) carries no hard
// constraint either, and ends the adoption; the soft forms count here, as
// a rollback that takes one away changes no judged field.
func mayAdopt(req admission.Request, oldFields, newFields placementFields, authored bool) bool {
	if !newFields.mayBeHard() && !authored && oldFields.adopted == "" || newFields.admissionLabel == string(pgadmission.ModeOff) {
		return false
	}
	return req.Operation != admissionv1.Update || !unchanged(oldFields, newFields) || !bytes.Equal(oldFields.preferred, newFields.preferred) || authored
}

func (a *Adopter) handle(ctx context.Context, req admission.Request) (admission.Response, bool) {
	v := a.Validator
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update || v.skipped(req) {
		return admission.Allowed(""), false
	}
	newFields, err := readPlacement(req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("read the %s: %w", req.Kind.Kind, err)), false
	}
	var oldFields placementFields
	if req.Operation == admissionv1.Update {
		if oldFields, err = readPlacement(req.OldObject.Raw); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("read the %s replaced: %w", req.Kind.Kind, err)), false
		}
	}
	author := fieldManager(req)
	if !mayAdopt(req, oldFields, newFields, authoredBy(oldFields.adopted, author)) {
		return admission.Allowed(""), false
	}
	mode, err := v.mode(ctx, req.Namespace)
	if mode != pgadmission.ModeAdopt {
		return admission.Allowed(""), false
	}
	// A namespace the cache does not know is no metric label: a request
	// names any namespace it likes.
	namespaceLabel := req.Namespace
	if err != nil {
		namespaceLabel = ""
	}
	obj, spec, err := podSpecOf(req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("read the %s: %w", req.Kind.Kind, err)), false
	}
	var old *corev1.PodSpec
	have := []adoption.Record(nil)
	if req.Operation == admissionv1.Update {
		var oldObj *unstructured.Unstructured
		if oldObj, old, err = podSpecOf(req.OldObject.Raw); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("read the %s replaced: %w", req.Kind.Kind, err)), false
		}
		// A record someone broke by hand is replaced, not kept.
		have, _ = adoption.Records(oldObj.GetAnnotations())
	}
	if obj.GetName() == "" {
		return admission.Allowed("").WithWarnings(fmt.Sprintf("placement-guard: %s with generateName not adopted: its migration needs the workload's name; judged as in Warn mode", req.Kind.Kind)), false
	}
	softened := adoption.Soften(req.Kind.Kind, obj.GetName(), old, spec)
	for i := range softened.Records {
		softened.Records[i].Author = author
	}
	// What the change's author wrote without a constraint it had adopted
	// is let go of: its soft form and its record go, and the operator
	// deletes the migration. What someone else took back (a rollback, an
	// edit) ends the adoption: the record stays, ended, and the operator
	// deletes the migration, so that it never hardens again what a person
	// just took back.
	dropped := adoption.Dropped(have, author, spec)
	takenBack := adoption.TakenBack(adoption.Without(have, dropped), author, old, spec)
	var warnings []string
	for _, why := range softened.Kept {
		warnings = append(warnings, pgadmission.ClipWarning(fmt.Sprintf("placement-guard: %s/%s not adopted: %s; judged as in Warn mode", req.Kind.Kind, obj.GetName(), why)))
	}
	for _, r := range dropped {
		warnings = append(warnings, pgadmission.ClipWarning(fmt.Sprintf("placement-guard: %s/%s: %s no longer in %s's manifest; its soft form and PlacementMigration %s go",
			req.Kind.Kind, obj.GetName(), r.Short(), author, r.Migration)))
	}
	writer := author
	if writer == "" {
		writer = req.UserInfo.Username
	}
	for _, r := range takenBack {
		warnings = append(warnings, pgadmission.ClipWarning(fmt.Sprintf("placement-guard: %s/%s: %s taken back by %s: its adoption ended and PlacementMigration %s goes; it stays as this write leaves it until %s changes it",
			req.Kind.Kind, obj.GetName(), r.Short(), writer, r.Migration, orAnyone(r.Author))))
	}
	if softened.Spec == nil && len(dropped) == 0 && len(takenBack) == 0 {
		return admission.Allowed("").WithWarnings(warnings...), false
	}
	records := adoption.Ending(adoption.Merge(adoption.Without(have, dropped), softened.Records), takenBack, "taken back by "+writer)
	result := spec
	if softened.Spec != nil {
		result = softened.Spec
		warnings = append(warnings, a.why(ctx, req, obj, old, softened, records, namespaceLabel)...)
	}
	for _, r := range dropped {
		result = r.Place(result, pgv1.StageNone)
	}
	patched, err := withSoftForm(obj, result, records)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err), false
	}
	logf.FromContext(ctx).V(1).Info("Adopted hard constraints", "kind", req.Kind.Kind, "namespace", req.Namespace, "name", obj.GetName(),
		"adopted", len(softened.Records), "dropped", len(dropped))
	return admission.PatchResponseFromRaw(req.Object.Raw, patched).WithWarnings(warnings...), true
}

// authoredBy reports whether an adoption annotation holds a record the
// field manager author made.
func authoredBy(annotation, author string) bool {
	if annotation == "" || author == "" {
		return false
	}
	records, err := adoption.Records(map[string]string{adoption.Annotation: annotation})
	return err == nil && slices.ContainsFunc(records, func(r adoption.Record) bool { return r.Author == author })
}

// why words what was adopted, and the engine's findings against the hard
// form: why it is not applied at once. old is the pod spec the change
// replaces (nil for a create). A judgement that cannot be made in the
// budget only leaves the findings out.
func (a *Adopter) why(ctx context.Context, req admission.Request, obj *unstructured.Unstructured, old *corev1.PodSpec, softened adoption.Softened, records []adoption.Record, namespaceLabel string) []string {
	var out []string
	for _, r := range softened.Records {
		what, soft := r.Short(), "preferred"
		if r.Spread != nil {
			soft = "ScheduleAnyway"
		}
		if kept := recordOf(records, r.Migration); kept != nil && !kept.Active() {
			// The constraint comes back in the manifest after its adoption
			// ended: it stays soft, and nothing hardens it.
			out = append(out, pgadmission.ClipWarning(fmt.Sprintf("placement-guard: %s/%s: %s kept %s: its adoption ended (%s); it is not hardened until %s changes it",
				req.Kind.Kind, obj.GetName(), what, soft, kept.Ended, orAnyone(kept.Author))))
			continue
		}
		out = append(out, pgadmission.ClipWarning(fmt.Sprintf("placement-guard: %s/%s: %s admitted as %s (Adopt); PlacementMigration %s makes it hard once safe: kubectl placement status %s",
			req.Kind.Kind, obj.GetName(), what, soft, r.Migration, r.Migration)))
	}
	hardObj, _, err := a.Validator.decode(req.Object)
	if err != nil {
		return out
	}
	judged, err := a.Validator.judge(ctx, callerOf(ctx).holderFor(req.UserInfo.Username), hardObj, old, false)
	if err != nil {
		return out
	}
	for _, f := range judged.Findings {
		metrics.CountFinding(namespaceLabel, kindLabel(req), f.Type, string(pgadmission.ModeAdopt))
	}
	return append(out, pgadmission.Warnings(judged.Findings)...)
}

// recordOf is the record of migration among records, nil when none.
func recordOf(records []adoption.Record, migration string) *adoption.Record {
	for i := range records {
		if records[i].Migration == migration {
			return &records[i]
		}
	}
	return nil
}

// orAnyone names a record's author for a person: "" (a request that named
// no field manager) is anyone who writes the manifest.
func orAnyone(author string) string {
	if author == "" {
		return "its manifest"
	}
	return author
}

// podSpecOf reads a serialized workload and its pod template's spec: every
// kind holds it at spec.template.spec.
func podSpecOf(raw []byte) (*unstructured.Unstructured, *corev1.PodSpec, error) {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		return nil, nil, err
	}
	fields, _, err := unstructured.NestedMap(obj.Object, "spec", "template", "spec")
	if err != nil {
		return nil, nil, fmt.Errorf("spec.template.spec: %w", err)
	}
	spec := &corev1.PodSpec{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(fields, spec); err != nil {
		return nil, nil, fmt.Errorf("spec.template.spec: %w", err)
	}
	return obj, spec, nil
}

// withSoftForm is the object with spec's affinity and spreads, and the
// records as its adoption annotation (none: the annotation goes).
func withSoftForm(obj *unstructured.Unstructured, spec *corev1.PodSpec, records []adoption.Record) ([]byte, error) {
	out := obj.DeepCopy()
	fields, err := runtime.DefaultUnstructuredConverter.ToUnstructured(spec)
	if err != nil {
		return nil, fmt.Errorf("write the soft form: %w", err)
	}
	for _, key := range []string{"affinity", "topologySpreadConstraints"} {
		if value, ok := fields[key]; ok {
			err = unstructured.SetNestedField(out.Object, value, "spec", "template", "spec", key)
		} else {
			unstructured.RemoveNestedField(out.Object, "spec", "template", "spec", key)
		}
		if err != nil {
			return nil, fmt.Errorf("write the soft form: %w", err)
		}
	}
	annotations := out.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	if len(records) == 0 {
		delete(annotations, adoption.Annotation)
	} else {
		value, err := adoption.Encode(records)
		if err != nil {
			return nil, err
		}
		annotations[adoption.Annotation] = value
	}
	out.SetAnnotations(annotations)
	return json.Marshal(out.Object)
}
