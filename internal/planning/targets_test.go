package planning

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

func TestTargetSelectorNeverSelectsCapacityRequests(t *testing.T) {
	labels := map[string]string{"app.kubernetes.io/managed-by": "placement-guard"}
	web := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: labels}}
	placeholders := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web-apart-capacity", Labels: labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: pgv1.GroupVersion.String(), Kind: "PlacementMigration", Name: "web-apart", UID: "u", Controller: ptr.To(true)}}}}
	spec := pgv1.PlacementMigrationSpec{TargetSelector: &pgv1.TargetSelector{Selector: *pgv1.Labels(labels)}}
	refs, err := TargetRefs(spec, []client.Object{web, placeholders})
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 1 || refs[0].Name != "web" {
		t.Fatalf("a migration's placeholders are never its targets: %+v", refs)
	}
}
