// Package v1alpha1 contains the API of placement-guard: the PlacementMigration
// kind, which turns a change of a workload's placement constraint into a
// guarded migration. It holds the types, their defaults and validation;
// importing it brings in no part of the operator.
// +kubebuilder:object:generate=true
// +groupName=placementguard.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: "placementguard.io", Version: "v1alpha1"}

	// SchemeBuilder adds the types of this package to a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this group and version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
