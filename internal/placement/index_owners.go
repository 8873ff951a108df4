package placement

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// owners are the selectors PodTopologySpread's system default constraints
// spread a pod by: the Services that select it, and the ReplicaSet,
// StatefulSet or ReplicationController that controls it, by name.
type owners struct {
	// services are each namespace's Services' selectors, by name.
	services map[string]map[string]labels.Set
	// controllers are the controllers' selectors by kind, namespace and name.
	controllers map[ownerKey]controllerSelector
}

// controllerSelector is a controller's selector: a ReplicationController's
// is a set of labels, merged into the Services' (its values win), the
// others' are requirements added to them.
type controllerSelector struct {
	requirements labels.Selector
	set          labels.Set
}

// The controllers whose selectors the system default spread reads.
const (
	kindReplicaSet            = "ReplicaSet"
	kindStatefulSet           = "StatefulSet"
	kindReplicationController = "ReplicationController"
)

type ownerKey struct {
	kind string
	types.NamespacedName
}

func newOwners() owners {
	return owners{services: map[string]map[string]labels.Set{}, controllers: map[ownerKey]controllerSelector{}}
}

// UpsertService adds or replaces a Service: the pods its selector selects
// spread by it when they carry no constraint of their own.
func (s *Snapshot) UpsertService(svc *corev1.Service) {
	byName := s.owners.services[svc.Namespace]
	if svc.Spec.Selector == nil {
		delete(byName, svc.Name)
		return
	}
	if byName == nil {
		byName = map[string]labels.Set{}
		s.owners.services[svc.Namespace] = byName
	}
	byName[svc.Name] = labels.Set(svc.Spec.Selector)
}

// DeleteService removes a Service.
func (s *Snapshot) DeleteService(namespace, name string) { delete(s.owners.services[namespace], name) }

// UpsertReplicaSet adds or replaces a ReplicaSet's selector.
func (s *Snapshot) UpsertReplicaSet(rs *appsv1.ReplicaSet) error {
	return s.upsertController(kindReplicaSet, rs.Namespace, rs.Name, rs.Spec.Selector)
}

// UpsertStatefulSet adds or replaces a StatefulSet's selector.
func (s *Snapshot) UpsertStatefulSet(ss *appsv1.StatefulSet) error {
	return s.upsertController(kindStatefulSet, ss.Namespace, ss.Name, ss.Spec.Selector)
}

// UpsertReplicationController adds or replaces a ReplicationController's
// selector.
func (s *Snapshot) UpsertReplicationController(rc *corev1.ReplicationController) error {
	s.owners.controllers[ownerKey{kindReplicationController, types.NamespacedName{Namespace: rc.Namespace, Name: rc.Name}}] = controllerSelector{set: labels.Set(rc.Spec.Selector)}
	return nil
}

// DeleteController removes the controller of that kind (ReplicaSet,
// StatefulSet, ReplicationController) and name.
func (s *Snapshot) DeleteController(kind, namespace, name string) {
	delete(s.owners.controllers, ownerKey{kind, types.NamespacedName{Namespace: namespace, Name: name}})
}

func (s *Snapshot) upsertController(kind, namespace, name string, ls *metav1.LabelSelector) error {
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return fmt.Errorf("selector of %s %s/%s: %w", kind, namespace, name, err)
	}
	s.owners.controllers[ownerKey{kind, types.NamespacedName{Namespace: namespace, Name: name}}] = controllerSelector{requirements: sel}
	return nil
}

// defaultSelector is the selector the system default constraints spread
// pod by: the selectors of the Services that select it merged, with its
// controller's added; empty when nothing selects it. owner stands in for
// the controller of a simulated pod, which names none.
func (s *Snapshot) defaultSelector(pod *corev1.Pod, owner labels.Selector) labels.Selector {
	merged := labels.Set{}
	for _, sel := range s.owners.services[pod.Namespace] {
		if sel.AsSelectorPreValidated().Matches(labels.Set(pod.Labels)) {
			merged = labels.Merge(merged, sel)
		}
	}
	if owner == nil {
		ref := metav1.GetControllerOfNoCopy(pod)
		if ref == nil || !ownedByAppsOrCore(ref) {
			return merged.AsSelector()
		}
		c, ok := s.owners.controllers[ownerKey{ref.Kind, types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}}]
		if !ok {
			return merged.AsSelector()
		}
		if c.set != nil {
			return labels.Merge(merged, c.set).AsSelector()
		}
		owner = c.requirements
	}
	selector := merged.AsSelector()
	if reqs, ok := owner.Requirements(); ok {
		selector = selector.Add(reqs...)
	}
	return selector
}

// ownedByAppsOrCore reports whether ref names a controller whose selector
// the scheduler reads: a ReplicaSet or StatefulSet of apps/v1, or a
// ReplicationController of v1.
func ownedByAppsOrCore(ref *metav1.OwnerReference) bool {
	switch ref.Kind {
	case kindReplicaSet, kindStatefulSet:
		return ref.APIVersion == "apps/v1"
	case kindReplicationController:
		return ref.APIVersion == "v1"
	}
	return false
}
