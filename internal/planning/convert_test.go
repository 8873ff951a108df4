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
