package adoption

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

func term(key, app string) corev1.PodAffinityTerm {
	return corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}
}

func spread(key string, when corev1.UnsatisfiableConstraintAction) corev1.TopologySpreadConstraint {
	return corev1.TopologySpreadConstraint{TopologyKey: key, MaxSkew: 1, WhenUnsatisfiable: when,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
}

func withTerms(required ...corev1.PodAffinityTerm) *corev1.PodSpec {
	return &corev1.PodSpec{Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: required}}}
}

func TestSoftenAdoptsOnlyWhatTheChangeAdds(t *testing.T) {
	old := withTerms(term("kubernetes.io/hostname", "web"))
	spec := withTerms(term("kubernetes.io/hostname", "web"), term("topology.kubernetes.io/zone", "search"))
	got := Soften("Deployment", "graphdb", old, spec)
	if len(got.Records) != 1 || got.Records[0].Index != 1 || got.Records[0].Term.TopologyKey != "topology.kubernetes.io/zone" {
		t.Fatalf("records = %+v, want the zone term at index 1", got.Records)
	}
	paa := got.Spec.Affinity.PodAntiAffinity
	if len(paa.RequiredDuringSchedulingIgnoredDuringExecution) != 1 || paa.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != "kubernetes.io/hostname" {
		t.Fatalf("required = %+v, want the term already there kept hard", paa.RequiredDuringSchedulingIgnoredDuringExecution)
	}
	if len(paa.PreferredDuringSchedulingIgnoredDuringExecution) != 1 || paa.PreferredDuringSchedulingIgnoredDuringExecution[0].Weight != placement.SoftWeight {
		t.Fatalf("preferred = %+v, want the new term soft", paa.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	if !equality.Semantic.DeepEqual(spec, withTerms(term("kubernetes.io/hostname", "web"), term("topology.kubernetes.io/zone", "search"))) {
		t.Fatal("Soften changed its input")
	}
}

func TestSoftenIsStableUnderAGitOpsReapply(t *testing.T) {
	// The manifest adds the term; the stored object is its soft form. The
	// same manifest applied again (a GitOps sync, a server-side dry run)
	// arrives as the stored object plus the hard term, and must give the
	// stored object back exactly: otherwise the tool sees endless drift.
	manifest := withTerms(term("kubernetes.io/hostname", "web"))
	first := Soften("Deployment", "web", nil, manifest)
	stored := first.Spec
	again := stored.DeepCopy()
	again.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = manifest.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	second := Soften("Deployment", "web", stored, again)
	if !equality.Semantic.DeepEqual(second.Spec, stored) {
		t.Fatalf("re-apply stored %+v, want %+v", second.Spec.Affinity, stored.Affinity)
	}
	if second.Records[0].Migration != first.Records[0].Migration {
		t.Fatalf("the re-apply names migration %s, the first %s", second.Records[0].Migration, first.Records[0].Migration)
	}
	// Once hardened, the manifest adds nothing: nothing is softened.
	hard := first.Records[0].Place(stored, pgv1.StageHard)
	if got := Soften("Deployment", "web", hard, hard.DeepCopy()); got.Spec != nil || len(got.Records) != 0 {
		t.Fatalf("a hardened workload re-applied was softened again: %+v", got)
	}
}

func TestSoftenSpreadsInPlace(t *testing.T) {
	hard := spread("topology.kubernetes.io/zone", corev1.DoNotSchedule)
	hard.MinDomains = ptr.To[int32](3)
	spec := &corev1.PodSpec{TopologySpreadConstraints: []corev1.TopologySpreadConstraint{spread("kubernetes.io/hostname", corev1.ScheduleAnyway), hard}}
	got := Soften("StatefulSet", "db", nil, spec)
	if len(got.Records) != 1 || got.Records[0].Index != 1 {
		t.Fatalf("records = %+v", got.Records)
	}
	soft := got.Spec.TopologySpreadConstraints[1]
	if soft.WhenUnsatisfiable != corev1.ScheduleAnyway || soft.MinDomains != nil || soft.TopologyKey != "topology.kubernetes.io/zone" {
		t.Fatalf("soft form = %+v, want ScheduleAnyway without minDomains in place", soft)
	}
	back := got.Records[0].Place(got.Spec, pgv1.StageHard)
	if !equality.Semantic.DeepEqual(back, spec) {
		t.Fatalf("hardened = %+v, want the manifest back", back.TopologySpreadConstraints)
	}
}

// A spread's soft form is a separate entry of the list (its key includes
// whenUnsatisfiable): a server-side apply of the same manifest keeps the
// soft form, which no manager owns, and appends the hard one after the
// other entries. Softening that must give back the stored list exactly.
func TestSoftenASpreadIsStableUnderAGitOpsReapply(t *testing.T) {
	hostname := spread("kubernetes.io/hostname", corev1.ScheduleAnyway)
	zone := spread("topology.kubernetes.io/zone", corev1.DoNotSchedule)
	manifest := &corev1.PodSpec{TopologySpreadConstraints: []corev1.TopologySpreadConstraint{zone, hostname}}
	first := Soften("Deployment", "web", nil, manifest)
	stored := first.Spec
	merged := stored.DeepCopy()
	merged.TopologySpreadConstraints = append(merged.TopologySpreadConstraints, zone)
	second := Soften("Deployment", "web", stored, merged)
	if !equality.Semantic.DeepEqual(second.Spec, stored) {
		t.Fatalf("re-apply stored %+v, want %+v", second.Spec.TopologySpreadConstraints, stored.TopologySpreadConstraints)
	}
	if len(second.Kept) != 0 || len(second.Records) != 1 || second.Records[0].Migration != first.Records[0].Migration {
		t.Fatalf("re-apply records %+v kept %q, want the first adoption's record again", second.Records, second.Kept)
	}
	if merged := Merge(first.Records, second.Records); !equality.Semantic.DeepEqual(merged, first.Records) {
		t.Fatalf("the re-apply changed the records: %+v", merged)
	}
}

func TestSoftenKeepsWhatItCannotAdopt(t *testing.T) {
	mismatch := term("kubernetes.io/hostname", "web")
	mismatch.MismatchLabelKeys = []string{"tenant"}
	noSelector := corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname"}
	twin := spread("topology.kubernetes.io/zone", corev1.DoNotSchedule)
	spec := withTerms(mismatch, noSelector)
	spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{twin, spread("topology.kubernetes.io/zone", corev1.ScheduleAnyway)}
	got := Soften("Deployment", "web", nil, spec)
	if got.Spec != nil || len(got.Records) != 0 {
		t.Fatalf("adopted %+v, want nothing", got.Records)
	}
	if len(got.Kept) != 3 {
		t.Fatalf("kept = %q, want three reasons", got.Kept)
	}
	for _, want := range []string{"mismatchLabelKeys", "no labelSelector", "ScheduleAnyway twin"} {
		if !strings.Contains(strings.Join(got.Kept, "|"), want) {
			t.Errorf("no reason mentions %q: %q", want, got.Kept)
		}
	}
}

func TestPlaceMovesBetweenStagesAndKeepsTheRest(t *testing.T) {
	other := term("kubernetes.io/hostname", "cache")
	adopted := term("kubernetes.io/hostname", "web")
	manifest := withTerms(other, adopted)
	manifest.Affinity.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "role", Operator: corev1.NodeSelectorOpIn, Values: []string{"web"}}}}}}}
	soft := Soften("Deployment", "web", withTerms(other), manifest)
	r := soft.Records[0]
	hard := r.Place(soft.Spec, pgv1.StageHard)
	if !equality.Semantic.DeepEqual(hard, manifest) {
		t.Fatalf("hard = %+v, want the manifest, its order kept", hard.Affinity.PodAntiAffinity)
	}
	if back := r.Place(hard, pgv1.StageSoft); !equality.Semantic.DeepEqual(back, soft.Spec) {
		t.Fatalf("rolled back = %+v, want the soft form", back.Affinity.PodAntiAffinity)
	}
	none := r.Place(hard, pgv1.StageNone)
	if len(none.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 || none.Affinity.NodeAffinity == nil {
		t.Fatalf("none = %+v, want only the other term and the node affinity", none.Affinity)
	}
}

// The migration made from a record writes, at each stage, what the record
// says: the engine's rendering of its constraint must be carried by the
// soft form Soften writes and by the manifest's hard form, or the
// migration would see neither and write its own.
func TestTheMigrationsConstraintIsTheRecordsForm(t *testing.T) {
	own := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	zone := spread("topology.kubernetes.io/zone", corev1.DoNotSchedule)
	zone.NodeTaintsPolicy = ptr.To(corev1.NodeInclusionPolicyHonor)
	cases := map[string]*corev1.PodSpec{
		"anti-affinity": withTerms(term("kubernetes.io/hostname", "search")),
		"spread":        {TopologySpreadConstraints: []corev1.TopologySpreadConstraint{zone}},
		"spread with matchLabelKeys": {TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{TopologyKey: "kubernetes.io/hostname", MaxSkew: 2,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: own, MatchLabelKeys: []string{"pod-template-hash"}}}},
	}
	for name, manifest := range cases {
		t.Run(name, func(t *testing.T) {
			soft := Soften("Deployment", "web", nil, manifest)
			r := soft.Records[0]
			c := planning.ConstraintFromSpec(r.Constraint()).ForWorkload(pgv1.KindDeployment)
			if got := c.StageOf(soft.Spec, own); got != pgv1.StageSoft {
				t.Errorf("the soft form is at stage %s for the migration", got)
			}
			if got := c.StageOf(manifest, own); got != pgv1.StageHard {
				t.Errorf("the manifest is at stage %s for the migration", got)
			}
		})
	}
}

func TestRecordsRoundTripAndMerge(t *testing.T) {
	a := Soften("Deployment", "web", nil, withTerms(term("kubernetes.io/hostname", "web"))).Records
	b := Soften("Deployment", "web", nil, withTerms(term("topology.kubernetes.io/zone", "web"))).Records
	moved := a[0]
	moved.Index = 3
	merged := Merge(a, append(b, moved))
	if len(merged) != 2 || merged[0].Index != 0 {
		t.Fatalf("merged = %+v, want two records, the first one's index kept", merged)
	}
	raw, err := Encode(merged)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Records(map[string]string{Annotation: raw})
	if err != nil || !equality.Semantic.DeepEqual(back, merged) {
		t.Fatalf("round trip = %+v, %v", back, err)
	}
	found, err := Find(map[string]string{Annotation: raw}, b[0].Migration)
	if err != nil || found == nil || found.Term.TopologyKey != "topology.kubernetes.io/zone" {
		t.Fatalf("Find = %+v, %v", found, err)
	}
	for _, bad := range []string{"{", `[{"migration":"x"}]`, `[{"term":{"topologyKey":"k"}}]`} {
		if _, err := Records(map[string]string{Annotation: bad}); err == nil {
			t.Errorf("Records(%s) accepted", bad)
		}
	}
}

func TestMigrationNames(t *testing.T) {
	r := Record{Term: ptr.To(term("kubernetes.io/hostname", "web"))}
	if a, b := MigrationName("Deployment", "web", r), MigrationName("StatefulSet", "web", r); a == b {
		t.Fatalf("a Deployment and a StatefulSet of one name share migration %s", a)
	}
	for _, name := range []string{"web", strings.Repeat("a", 253), strings.Repeat("a.", 126) + "a"} {
		got := MigrationName("Deployment", name, r)
		if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
			t.Errorf("MigrationName(%d characters) = %q: %v", len(name), got, errs)
		}
		if again := MigrationName("Deployment", name, r); again != got {
			t.Errorf("MigrationName is not stable: %s, then %s", got, again)
		}
	}
	raw, _ := json.Marshal(r)
	if !strings.Contains(string(raw), `"index":0`) {
		t.Fatalf("record encodes as %s", raw)
	}
}

// A record is let go of only when its author writes without it: another
// writer's change, a request that names no manager, or the author's
// change that still has it (adopted again, or hardened) keep it.
func TestDroppedOnlyByItsAuthor(t *testing.T) {
	manifest := withTerms(term("kubernetes.io/hostname", "web"))
	soft := Soften("Deployment", "web", nil, manifest)
	records := soft.Records
	records[0].Author = "kustomize-controller"
	for _, c := range []struct {
		name, author string
		spec         *corev1.PodSpec
		dropped      bool
	}{
		{"the author's manifest without it", "kustomize-controller", soft.Spec, true},
		{"another writer without it (an annotation, an HPA)", "kubectl-annotate", soft.Spec, false},
		{"a request that names no manager", "", soft.Spec, false},
		{"the author's manifest still with it", "kustomize-controller", records[0].Place(soft.Spec, pgv1.StageHard), false},
		{"the author's manifest without it, its soft form gone too", "kustomize-controller", &corev1.PodSpec{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := len(Dropped(records, c.author, c.spec)) == 1; got != c.dropped {
				t.Fatalf("dropped %v, want %v", got, c.dropped)
			}
		})
	}
	if left := Without(records, records); len(left) != 0 {
		t.Fatalf("Without left %+v", left)
	}
}

// A write by someone other than the author that takes an adopted
// constraint to a weaker form (a rollback, an edit) takes it back; the
// same constraint kept, strengthened, or a record already ended, does not.
func TestTakenBackByAnyoneButTheAuthor(t *testing.T) {
	manifest := withTerms(term("kubernetes.io/hostname", "search"))
	soft := Soften("Deployment", "graphdb", nil, manifest)
	records := soft.Records
	records[0].Author = "helm"
	hard := records[0].Place(soft.Spec, pgv1.StageHard)
	none := records[0].Place(soft.Spec, pgv1.StageNone)
	for _, c := range []struct {
		name, writer string
		old, new     *corev1.PodSpec
		takenBack    bool
	}{
		{"kubectl rollout undo of the soft form", "kubectl-rollout", soft.Spec, none, true},
		{"a rollback of the hardened form to the soft one", "argocd-controller", hard, soft.Spec, true},
		{"a rollback of the hardened form to none, naming no manager", "", hard, none, true},
		{"an image change: the form kept", "kubectl-set", soft.Spec, soft.Spec, false},
		{"a person hardening it by hand: stronger", "kubectl-edit", soft.Spec, hard, false},
		{"the author's own write, which Dropped judges", "helm", soft.Spec, none, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := len(TakenBack(records, c.writer, c.old, c.new)) == 1; got != c.takenBack {
				t.Fatalf("taken back %v, want %v", got, c.takenBack)
			}
		})
	}
	ended := Ending(records, records, "PlacementMigration x was deleted")
	if ended[0].Active() || records[0].Ended != "" {
		t.Fatalf("Ending: %+v, and it must not change its input: %+v", ended, records)
	}
	if got := TakenBack(ended, "kubectl-rollout", soft.Spec, none); len(got) != 0 {
		t.Fatal("an ended record is taken back again")
	}
	if again := Ending(ended, ended, "later"); again[0].Ended != "PlacementMigration x was deleted" {
		t.Fatalf("the first reason an adoption ended for is kept: %q", again[0].Ended)
	}
	if marked := Marked(records, records[0].Migration, "uid-1"); marked[0].Made != "uid-1" || records[0].Made != "" {
		t.Fatalf("Marked: %+v", marked)
	}
}

// A hardened record goes back where the manifest had it, whatever form
// the workload carries meanwhile: a GitOps tool compares the lists in
// order, and a term or spread moved to the end is drift it would undo.
func TestPlaceGivesTheManifestBackInItsOrder(t *testing.T) {
	manifest := withTerms(term("kubernetes.io/hostname", "web"), term("topology.kubernetes.io/zone", "search"), term("kubernetes.io/hostname", "cache"))
	manifest.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{
		spread("topology.kubernetes.io/zone", corev1.DoNotSchedule), spread("kubernetes.io/hostname", corev1.ScheduleAnyway)}
	old := withTerms(term("kubernetes.io/hostname", "web"), term("kubernetes.io/hostname", "cache"))
	old.TopologySpreadConstraints = manifest.TopologySpreadConstraints[1:]
	got := Soften("Deployment", "web", old, manifest)
	if len(got.Records) != 2 {
		t.Fatalf("records = %+v, want the zone term and the zone spread", got.Records)
	}
	for _, from := range []pgv1.Stage{pgv1.StageSoft, pgv1.StageNone} {
		spec := got.Spec
		for _, r := range got.Records {
			spec = r.Place(spec, from)
		}
		for _, r := range got.Records {
			spec = r.Place(spec, pgv1.StageHard)
		}
		if !equality.Semantic.DeepEqual(spec, manifest) {
			t.Errorf("hardened from %s: terms %+v, spreads %+v; want the manifest's order", from,
				spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, spec.TopologySpreadConstraints)
		}
	}
}
