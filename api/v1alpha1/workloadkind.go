package v1alpha1

import "k8s.io/apimachinery/pkg/runtime/schema"

// GroupVersionKind is the API type of a workload of this kind: both kinds
// placement-guard migrates are apps/v1.
func (k WorkloadKind) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: string(k)}
}
