package planning

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// The engine cannot import the API package, so its hazard names are
// declared twice; this keeps the two lists the same, read from the sources
// so that a hazard added to one and not the other fails here.
func TestHazardTypesMatchTheAPI(t *testing.T) {
	engine := hazardConsts(t, "../placement/hazards.go")
	api := hazardConsts(t, "../../api/v1alpha1/conditions.go")
	if len(engine) == 0 {
		t.Fatal("no hazard found in the engine's source")
	}
	for name, value := range engine {
		if api[name] != value {
			t.Errorf("the engine's %s = %q; the API has %q", name, value, api[name])
		}
	}
	for name, value := range api {
		if engine[name] != value {
			t.Errorf("the API's %s = %q; the engine has %q", name, value, engine[name])
		}
	}
}

// hazardConsts reads the string constants named Hazard* of a Go file.
func hazardConsts(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if !strings.HasPrefix(n.Name, "Hazard") || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					out[n.Name], _ = strconv.Unquote(lit.Value)
				}
			}
		}
	}
	return out
}

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
