package webhook

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	pgadmission "github.com/placement-guard/placement-guard/internal/admission"
	"github.com/placement-guard/placement-guard/internal/adoption"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/workloadpatch"
)

// admitted is the object the API server would store: the request's object
// with the response's patch.
func admitted(t *testing.T, req admission.Request, resp admission.Response) *appsv1.Deployment {
	t.Helper()
	if !resp.Allowed {
		t.Fatalf("refused: %+v", resp.Result)
	}
	raw := req.Object.Raw
	if len(resp.Patches) > 0 {
		ops, err := json.Marshal(resp.Patches)
		if err != nil {
			t.Fatal(err)
		}
		patch, err := jsonpatch.DecodePatch(ops)
		if err != nil {
			t.Fatal(err)
		}
		if raw, err = patch.Apply(raw); err != nil {
			t.Fatal(err)
		}
	}
	out := &appsv1.Deployment{}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func adopter(t *testing.T, namespaceMode string) *Adopter {
	v, _ := validator(t, namespaceMode, pgadmission.ModeWarn)
	return &Adopter{Validator: v}
}

// Seed 001's change in an Adopt namespace: admitted soft, recorded, and
// the warnings name the migration and why the hard form waits.
func TestAdoptAdmitsTheSoftFormAndSaysWhy(t *testing.T) {
	ctx := context.Background()
	a := adopter(t, "Adopt")
	req := request(t, admissionv1.Update, web(), web(apart), "kubectl")
	resp := a.Handle(ctx, req)
	stored := admitted(t, req, resp)
	paa := stored.Spec.Template.Spec.Affinity.PodAntiAffinity
	if len(paa.RequiredDuringSchedulingIgnoredDuringExecution) != 0 || len(paa.PreferredDuringSchedulingIgnoredDuringExecution) != 1 ||
		paa.PreferredDuringSchedulingIgnoredDuringExecution[0].Weight != placement.SoftWeight {
		t.Fatalf("stored anti-affinity %+v, want the term as a preferred one", paa)
	}
	records, err := adoption.Records(stored.Annotations)
	if err != nil || len(records) != 1 {
		t.Fatalf("records %+v, %v", records, err)
	}
	said := strings.Join(resp.Warnings, "\n")
	for _, want := range []string{"admitted as preferred (Adopt)", "PlacementMigration " + records[0].Migration, "RolloutDeadlock"} {
		if !strings.Contains(said, want) {
			t.Errorf("warnings %q do not say %q", said, want)
		}
	}
	for _, w := range resp.Warnings {
		if len([]rune(w)) > 256 {
			t.Errorf("a warning of %d characters", len([]rune(w)))
		}
	}

	// The same manifest applied again, as a GitOps sync or its server-side
	// dry run sends it (the stored object with the manifest's fields),
	// gives back exactly what is stored: no drift.
	again := stored.DeepCopy()
	apart(again)
	again.Spec.Template.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = paa.PreferredDuringSchedulingIgnoredDuringExecution
	req2 := request(t, admissionv1.Update, stored, again, "kustomize-controller")
	if second := admitted(t, req2, a.Handle(ctx, req2)); !equality.Semantic.DeepEqual(second.Spec, stored.Spec) || !equality.Semantic.DeepEqual(second.Annotations, stored.Annotations) {
		t.Fatalf("re-applied manifest stored %+v, want %+v", second.Spec.Template.Spec.Affinity, stored.Spec.Template.Spec.Affinity)
	}
}

// What Adopt leaves alone: other modes, changes that add nothing hard,
// what it cannot adopt, the migration's own hardening write.
func TestAdoptLeavesAlone(t *testing.T) {
	ctx := context.Background()
	mismatch := func(d *appsv1.Deployment) {
		apart(d)
		d.Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].MismatchLabelKeys = []string{"tenant"}
	}
	image := func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "x:2" }
	for _, c := range []struct {
		name, namespaceMode string
		req                 admission.Request
		says                string
	}{
		{"a Warn namespace", "Warn", request(t, admissionv1.Update, web(), web(apart), ""), ""},
		{"an image change of a hard workload", "Adopt", request(t, admissionv1.Update, web(apart), web(apart, image), ""), ""},
		{"a term with mismatchLabelKeys", "Adopt", request(t, admissionv1.Update, web(), web(mismatch), ""), "not adopted: the required anti-affinity term on kubernetes.io/hostname uses mismatchLabelKeys"},
		{"the migration's hardening write", "Adopt", asUser(request(t, admissionv1.Update, web(), web(apart), workloadpatch.FieldManager("web-adopted-1")), operatorUser), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := adopter(t, c.namespaceMode).Handle(ctx, c.req)
			if len(resp.Patches) > 0 {
				t.Fatalf("patched: %+v", resp.Patches)
			}
			said := strings.Join(resp.Warnings, "\n")
			if c.says == "" && said != "" || !strings.Contains(said, c.says) {
				t.Fatalf("said %q, want %q", said, c.says)
			}
		})
	}
}

// A create is adopted too, and a spread keeps its place in the list.
func TestAdoptACreatedWorkloadsSpread(t *testing.T) {
	ctx := context.Background()
	d := web(func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{
			{TopologyKey: corev1.LabelTopologyZone, MaxSkew: 1, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: d.Spec.Selector},
			{TopologyKey: corev1.LabelHostname, MaxSkew: 1, WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: d.Spec.Selector},
		}
	})
	req := request(t, admissionv1.Create, nil, d, "helm")
	stored := admitted(t, req, adopter(t, "Adopt").Handle(ctx, req))
	tsc := stored.Spec.Template.Spec.TopologySpreadConstraints
	if len(tsc) != 2 || tsc[0].TopologyKey != corev1.LabelTopologyZone || tsc[0].WhenUnsatisfiable != corev1.ScheduleAnyway || tsc[1].TopologyKey != corev1.LabelHostname {
		t.Fatalf("stored spreads %+v, want the zone spread soft in first place", tsc)
	}
}

// The author's manifest applied again without the adopted term lets it go:
// the soft form and the record leave with it, in the same write, and the
// warning says so. Another writer's change keeps both.
func TestAdoptLetsGoOfWhatTheAuthorDropped(t *testing.T) {
	ctx := context.Background()
	a := adopter(t, "Adopt")
	req := request(t, admissionv1.Update, web(), web(apart), "kustomize-controller")
	stored := admitted(t, req, a.Handle(ctx, req))

	// Another writer (an annotation) sends the stored object back: kept.
	annotated := stored.DeepCopy()
	annotated.Labels = map[string]string{"team": "a"}
	other := request(t, admissionv1.Update, stored, annotated, "kubectl-label")
	if resp := a.Handle(ctx, other); len(resp.Patches) > 0 {
		t.Fatalf("another writer's change was patched: %+v", resp.Patches)
	}

	// The author's manifest without the term: the merge keeps the soft
	// form, which no manager owns; the check takes it out.
	dropped := stored.DeepCopy()
	resp := a.Handle(ctx, request(t, admissionv1.Update, stored, dropped, "kustomize-controller"))
	after := admitted(t, request(t, admissionv1.Update, stored, dropped, "kustomize-controller"), resp)
	if after.Spec.Template.Spec.Affinity != nil && after.Spec.Template.Spec.Affinity.PodAntiAffinity != nil {
		t.Fatalf("the soft form stayed: %+v", after.Spec.Template.Spec.Affinity.PodAntiAffinity)
	}
	if _, ok := after.Annotations[adoption.Annotation]; ok {
		t.Fatalf("the record stayed: %s", after.Annotations[adoption.Annotation])
	}
	if said := strings.Join(resp.Warnings, "\n"); !strings.Contains(said, "no longer in kustomize-controller's manifest") {
		t.Fatalf("warnings %q", said)
	}
}

// A write that names a migration's field manager but does not come from
// the operator is adopted as any other: the name alone exempts nothing.
func TestAdoptABorrowedFieldManagersWrite(t *testing.T) {
	ctx := context.Background()
	req := asUser(request(t, admissionv1.Update, web(), web(apart), workloadpatch.FieldManager("web-adopted-1")), "jane")
	stored := admitted(t, req, adopter(t, "Adopt").Handle(ctx, req))
	if paa := stored.Spec.Template.Spec.Affinity.PodAntiAffinity; len(paa.RequiredDuringSchedulingIgnoredDuringExecution) != 0 {
		t.Fatalf("stored anti-affinity %+v, want it adopted soft", paa)
	}
}
