package planning

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// Which of two migrations of one workload may write a field: the one that
// holds it, else the older, else the one of the smaller name; a migration
// not created yet comes last; compatible constraints share the workload.
func TestClaimOf(t *testing.T) {
	web := pgv1.TargetRef{Kind: pgv1.KindDeployment, Name: "web"}
	at := func(minutes int) metav1.Time {
		return metav1.NewTime(time.Date(2026, 11, 25, 10, minutes, 0, 0, time.UTC))
	}
	hostname := pgv1.Constraint{PodAntiAffinity: &pgv1.PodAntiAffinityConstraint{TopologyKey: corev1.LabelHostname}}
	zones := pgv1.Constraint{TopologySpread: &pgv1.TopologySpreadConstraint{TopologyKey: corev1.LabelTopologyZone, MaxSkew: 1}}
	zonesLoose := pgv1.Constraint{TopologySpread: &pgv1.TopologySpreadConstraint{TopologyKey: corev1.LabelTopologyZone, MaxSkew: 2}}
	hosts := pgv1.Constraint{TopologySpread: &pgv1.TopologySpreadConstraint{TopologyKey: corev1.LabelHostname, MaxSkew: 1}}
	migration := func(name string, created metav1.Time, c pgv1.Constraint, written bool) pgv1.PlacementMigration {
		pm := pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: created},
			Spec: pgv1.PlacementMigrationSpec{Targets: []pgv1.TargetRef{web}, Constraint: c}}
		if written {
			pm.Status.Targets = []pgv1.TargetStatus{{Kind: web.Kind, Name: web.Name, Stage: pgv1.StageHard}}
		}
		return pm
	}
	for _, c := range []struct {
		name   string
		pm     pgv1.PlacementMigration
		others []pgv1.PlacementMigration
		want   string
	}{
		{"a second spread on the key another holds", migration("b", at(5), zonesLoose, false), []pgv1.PlacementMigration{migration("a", at(0), zones, true)}, "a"},
		{"holding it beats being older", migration("b", at(5), zonesLoose, true), []pgv1.PlacementMigration{migration("a", at(0), zones, false)}, ""},
		{"the older goes first for a field neither holds", migration("b", at(5), hostname, false), []pgv1.PlacementMigration{migration("a", at(0), hostname, false)}, "a"},
		{"the newer is not blocked by the younger", migration("a", at(0), hostname, false), []pgv1.PlacementMigration{migration("b", at(5), hostname, false)}, ""},
		{"created at once: the smaller name first", migration("b", at(0), hostname, false), []pgv1.PlacementMigration{migration("a", at(0), hostname, false)}, "a"},
		{"one read from a file comes last", migration("a", metav1.Time{}, hostname, false), []pgv1.PlacementMigration{migration("z", at(0), hostname, false)}, "z"},
		{"a spread on another key shares the workload", migration("b", at(5), hosts, false), []pgv1.PlacementMigration{migration("a", at(0), zones, true)}, ""},
		{"itself, as plan -f of an applied migration reads it", migration("a", at(0), zones, false), []pgv1.PlacementMigration{migration("a", at(0), zones, true)}, ""},
	} {
		got := ClaimOf(IntentOf(&c.pm), c.others, []pgv1.TargetRef{web})
		switch {
		case c.want == "" && got != nil:
			t.Errorf("%s: claimed by %s", c.name, got.Migration)
		case c.want != "" && (got == nil || got.Migration != c.want):
			t.Errorf("%s: want claimed by %s, got %+v", c.name, c.want, got)
		}
	}
	dry := migration("a", at(0), hostname, true)
	dry.Spec.DryRun = true
	if got := ClaimOf(IntentOf(&pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Name: "b", CreationTimestamp: at(5)}, Spec: pgv1.PlacementMigrationSpec{Constraint: hostname}}),
		[]pgv1.PlacementMigration{dry}, []pgv1.TargetRef{web}); got != nil {
		t.Errorf("a dry run, which never writes, claims nothing: %+v", got)
	}
	deleting := migration("a", at(0), zones, true)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	if got := ClaimOf(IntentOf(&pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Name: "b", CreationTimestamp: at(5)}, Spec: pgv1.PlacementMigrationSpec{Constraint: zonesLoose}}),
		[]pgv1.PlacementMigration{deleting}, []pgv1.TargetRef{web}); got != nil {
		t.Errorf("a migration being deleted claims nothing: %+v", got)
	}
}
