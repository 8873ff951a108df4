// Package targets turns live workloads into the placement engine's
// Workloads: the controller, the pod template it rolls out and the pods it
// owns now, found through owner references as the controllers set them.
//
// Each workload kind the project migrates is known here and nowhere else,
// in a Kind of its own file (kind_deployment.go, kind_statefulset.go):
// adding a kind is one file and its tests. The package knows nothing of
// reconciling, of the API server or of a migration's spec.
package targets

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// replicas applies the API's default of one replica.
func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

func controlledBy(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, ref := range refs {
		if ref.Controller != nil && *ref.Controller && ref.UID == uid {
			return true
		}
	}
	return false
}
