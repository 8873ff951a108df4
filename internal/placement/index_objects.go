package placement

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The objects besides nodes and pods that the filters read, kept by name.

// UpsertNamespace adds or replaces a namespace (its labels feed namespace selectors).
func (s *Snapshot) UpsertNamespace(ns *corev1.Namespace) { s.namespaces[ns.Name] = ns }

// DeleteNamespace removes a namespace.
func (s *Snapshot) DeleteNamespace(name string) { delete(s.namespaces, name) }

// UpsertClaim adds or replaces a PersistentVolumeClaim.
func (s *Snapshot) UpsertClaim(c *corev1.PersistentVolumeClaim) {
	s.claims[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}] = c
}

// DeleteClaim removes a PersistentVolumeClaim.
func (s *Snapshot) DeleteClaim(namespace, name string) {
	delete(s.claims, types.NamespacedName{Namespace: namespace, Name: name})
}

// UpsertVolume adds or replaces a PersistentVolume.
func (s *Snapshot) UpsertVolume(v *corev1.PersistentVolume) { s.volumes[v.Name] = v }

// DeleteVolume removes a PersistentVolume.
func (s *Snapshot) DeleteVolume(name string) { delete(s.volumes, name) }

// UpsertStorageClass adds or replaces a StorageClass.
func (s *Snapshot) UpsertStorageClass(sc *storagev1.StorageClass) { s.storageClasses[sc.Name] = sc }

// DeleteStorageClass removes a StorageClass.
func (s *Snapshot) DeleteStorageClass(name string) { delete(s.storageClasses, name) }
