// Package v1alpha1 contains the API of placement-guard: the PlacementMigration
// kind, which turns a change of a workload's placement constraint into a
// guarded migration. It holds the types, their defaults and validation;
// importing it brings in no part of the operator.
// +kubebuilder:object:generate=true
// +groupName=placementguard.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The scheme is built with apimachinery's builder, as k8s.io/api's groups
// are, not controller-runtime's: the placement engine and the plugin use
// these types, and importing them brings no controller framework along.
var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: "placementguard.io", Version: "v1alpha1"}

	// SchemeBuilder adds the types of this package to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this group and version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &PlacementMigration{}, &PlacementMigrationList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
