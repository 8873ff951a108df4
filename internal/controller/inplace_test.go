package controller

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/placement-guard/placement-guard/internal/adoption"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/planning"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// Only a record the workload carries, for this migration and of the
// constraint the stage writes, moves a term in place; anything else is
// written with the migration's own server-side apply, which never takes
// another manager's fields.
func TestOnlyTheWorkloadsRecordIsWrittenInPlace(t *testing.T) {
	own := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "graphdb"}}
	term := corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "search"}}}
	manifest := &corev1.PodSpec{Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}}
	softened := adoption.Soften("Deployment", "graphdb", nil, manifest)
	rec := softened.Records[0]
	value, err := adoption.Encode(softened.Records)
	if err != nil {
		t.Fatal(err)
	}
	workload := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "graphdb", Annotations: map[string]string{adoption.Annotation: value}}}

	adopted := planning.ConstraintFromSpec(rec.Constraint()).ForWorkload(pgv1.KindDeployment)
	other := placement.Constraint{AntiAffinity: &placement.AntiAffinity{TopologyKey: corev1.LabelTopologyZone, Selector: term.LabelSelector}}
	entry := func(c placement.Constraint, stage pgv1.Stage) *corev1.PodSpec {
		e, err := c.Entry(own, stage)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	for _, c := range []struct {
		name      string
		migration string
		entry     *corev1.PodSpec
		inPlace   bool
	}{
		{"the hard stage of the adopted constraint", rec.Migration, entry(adopted, pgv1.StageHard), true},
		{"its rollback to soft", rec.Migration, entry(adopted, pgv1.StageSoft), true},
		{"another constraint under the record's name", rec.Migration, entry(other, pgv1.StageHard), false},
		{"another migration", "graphdb-apart", entry(adopted, pgv1.StageHard), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := adoptedRecord(workload, c.migration, c.entry) != nil; got != c.inPlace {
				t.Fatalf("written in place: %v, want %v", got, c.inPlace)
			}
		})
	}
	broken := workload.DeepCopy()
	broken.Annotations[adoption.Annotation] = "{"
	if adoptedRecord(broken, rec.Migration, entry(adopted, pgv1.StageHard)) != nil {
		t.Fatal("a broken annotation was acted on")
	}
}
