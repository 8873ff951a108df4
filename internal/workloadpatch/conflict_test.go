package workloadpatch

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestIsPreconditionFailedTellsAWorkloadReplacedOrChangedFromAFieldConflict(t *testing.T) {
	deployments := schema.GroupResource{Group: "apps", Resource: "deployments"}
	managerConflict := apierrors.NewApplyConflict([]metav1.StatusCause{{
		Type: metav1.CauseTypeFieldManagerConflict, Field: ".spec.template.spec.affinity", Message: `conflict with "helm"`}}, "Apply failed with 1 conflict")
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"the uid precondition failed (409, no field manager)", apierrors.NewConflict(deployments, "web", errors.New("Precondition failed: UID in precondition: a, UID in object meta: b")), true},
		{"the uid refused as immutable (422 on metadata.uid)", apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "web",
			field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), "b", "field is immutable")}), true},
		{"another manager owns the field", managerConflict, false},
		{"an invalid template", apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "web",
			field.ErrorList{field.Invalid(field.NewPath("spec", "template", "spec", "topologySpreadConstraints").Index(0).Child("maxSkew"), 0, "must be greater than zero")}), false},
		{"not found", apierrors.NewNotFound(deployments, "web"), false},
		{"a timeout", apierrors.NewTimeoutError("slow", 1), false},
	} {
		if got := IsPreconditionFailed(c.err); got != c.want {
			t.Errorf("%s: IsPreconditionFailed = %v, want %v", c.name, got, c.want)
		}
	}
}
