package workloadpatch

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OwnsPlacementFields reports whether a managed fields entry holds pod
// anti-affinity or spread constraints: whether that manager wrote the
// fields a migration writes.
func OwnsPlacementFields(mf metav1.ManagedFieldsEntry) bool {
	if mf.FieldsV1 == nil {
		return false
	}
	raw := mf.FieldsV1.GetRawString()
	return strings.Contains(raw, `"f:podAntiAffinity"`) || strings.Contains(raw, `"f:topologySpreadConstraints"`)
}
