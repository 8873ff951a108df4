package planning

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
)

func TestConstraintFromSpec(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "search"}}
	got := ConstraintFromSpec(pgv1.Constraint{PodAntiAffinity: &pgv1.PodAntiAffinityConstraint{TopologyKey: corev1.LabelHostname, LabelSelector: pgv1.SelectorFrom(sel)}})
	if got.AntiAffinity == nil || got.Spread != nil || got.AntiAffinity.TopologyKey != corev1.LabelHostname || !equality.Semantic.DeepEqual(got.AntiAffinity.Selector, sel) {
		t.Fatalf("anti-affinity: %+v", got)
	}
	three := int32(3)
	got = ConstraintFromSpec(pgv1.Constraint{TopologySpread: &pgv1.TopologySpreadConstraint{
		TopologyKey: corev1.LabelTopologyZone, MaxSkew: 1, MinDomains: &three, NodeTaintsPolicy: pgv1.PolicyHonor,
	}})
	if got.Spread == nil || *got.Spread.MinDomains != 3 || got.Spread.NodeAffinityPolicy != nil || *got.Spread.NodeTaintsPolicy != corev1.NodeInclusionPolicyHonor {
		t.Fatalf("spread: %+v", got.Spread)
	}
	if got.Spread.AllRevisions {
		t.Fatal("an unset revisionScope counts only the new revision")
	}
	all := pgv1.RevisionScopeAll
	got = ConstraintFromSpec(pgv1.Constraint{TopologySpread: &pgv1.TopologySpreadConstraint{TopologyKey: corev1.LabelTopologyZone, RevisionScope: &all}})
	if !got.Spread.AllRevisions {
		t.Fatal("revisionScope: AllRevisions must reach the engine")
	}
}

// A constraint written straight into a template is asked about as a
// migration's: the API's form must carry everything the engine reads.
func TestSpecFromConstraintKeepsWhatTheEngineReads(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}
	two := int32(2)
	honor, ignore := corev1.NodeInclusionPolicyHonor, corev1.NodeInclusionPolicyIgnore
	cases := []struct {
		name string
		c    placement.Constraint
		want placement.Constraint
	}{
		{"anti-affinity across namespaces", placement.Constraint{AntiAffinity: &placement.AntiAffinity{TopologyKey: corev1.LabelHostname, Selector: sel,
			MatchLabelKeys: []string{"pod-template-hash"}, Namespaces: []string{"shop", "ledger"}, NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}}}, placement.Constraint{}},
		{"anti-affinity against the workload's own pods", placement.Constraint{AntiAffinity: &placement.AntiAffinity{TopologyKey: corev1.LabelTopologyZone}}, placement.Constraint{}},
		{"a spread of every revision, with its policies", placement.Constraint{Spread: &placement.Spread{TopologyKey: corev1.LabelTopologyZone, MaxSkew: 2, MinDomains: &two,
			Selector: sel, NodeAffinityPolicy: &ignore, NodeTaintsPolicy: &honor, AllRevisions: true}}, placement.Constraint{}},
		{"a spread of the new revision", placement.Constraint{Spread: &placement.Spread{TopologyKey: corev1.LabelHostname, MaxSkew: 1}}, placement.Constraint{}},
		// matchLabelKeys decide what a spread counts whatever the scope:
		// the scope is left unwritten, and the engine counts the same.
		{"a spread naming matchLabelKeys", placement.Constraint{Spread: &placement.Spread{TopologyKey: corev1.LabelHostname, MaxSkew: 1,
			MatchLabelKeys: []string{"pod-template-hash"}, AllRevisions: true}},
			placement.Constraint{Spread: &placement.Spread{TopologyKey: corev1.LabelHostname, MaxSkew: 1, MatchLabelKeys: []string{"pod-template-hash"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want.AntiAffinity == nil && want.Spread == nil {
				want = tc.c
			}
			if got := ConstraintFromSpec(SpecFromConstraint(tc.c)); !equality.Semantic.DeepEqual(got, want) {
				t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestHazardMessagesStayWithinTheAPIBound(t *testing.T) {
	long := strings.Repeat("é€😀", 1000)
	hs := HazardsFromAnswer([]placement.Hazard{{Type: placement.HazardUnschedulable, Blocking: true, Message: long}})
	if n := len(hs[0].Message); n > 2048 {
		t.Fatalf("message is %d bytes", n)
	}
	if !strings.HasSuffix(hs[0].Message, "...") || strings.ContainsRune(hs[0].Message, '\uFFFD') {
		t.Fatal("a truncated message ends in ... and never in half a character")
	}
	if hs[0].Severity != pgv1.SeverityBlocking {
		t.Fatalf("severity %s", hs[0].Severity)
	}
}
