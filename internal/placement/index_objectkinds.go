package placement

import (
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The object kinds the engine reads, listed once: the operator's cluster
// state watches them, `kubectl placement` lists them or reads them from a
// snapshot directory, and the manager's role grants reading them (a test
// of internal/clusterstate holds config/rbac to this list).

// ObjectKind is one kind of object the engine reads.
type ObjectKind struct {
	// Group and Resource name the kind for the API and for RBAC.
	Group, Resource string
	// Fed says the operator's own feeds bring the kind (pods and nodes,
	// decoded for the engine), not the manager's informers.
	Fed bool
	// PerNamespace says the engine reads the kind only in the namespace
	// of a pod it places (what spreads the pod by default): a plan of a
	// namespace's migrations needs that namespace's alone.
	PerNamespace bool
	// Selector is all the engine reads of an object of the kind, for a
	// kind read only for the pods it selects (nil for the others): an
	// update that keeps it changes no answer.
	Selector func(obj runtime.Object) any
	// New and NewList are an empty object and list of the kind.
	New, NewList func() runtime.Object
	// Upsert indexes an object of the kind, Delete forgets it.
	Upsert func(s *Snapshot, obj runtime.Object) error
	Delete func(s *Snapshot, obj runtime.Object)
	// collect adds an object of the kind to Objects; upsertAll indexes
	// every object of the kind that Objects holds.
	collect   func(objs *Objects, obj runtime.Object)
	upsertAll func(s *Snapshot, objs *Objects) error
	// is says whether obj is of the kind.
	is func(obj any) bool
}

// objectKind builds the ObjectKind of the Go type T.
// field is where Objects holds the objects of the kind.
func objectKind[T runtime.Object, L runtime.Object](group, resource string, fed bool,
	upsert func(*Snapshot, T) error, del func(*Snapshot, T), field func(*Objects) *[]T) ObjectKind {
	return ObjectKind{
		Group: group, Resource: resource, Fed: fed,
		New:     func() runtime.Object { return newOf[T]() },
		NewList: func() runtime.Object { return newOf[L]() },
		Upsert:  func(s *Snapshot, obj runtime.Object) error { return upsert(s, obj.(T)) },
		Delete:  func(s *Snapshot, obj runtime.Object) { del(s, obj.(T)) },
		collect: func(objs *Objects, obj runtime.Object) { f := field(objs); *f = append(*f, obj.(T)) },
		upsertAll: func(s *Snapshot, objs *Objects) error {
			for _, obj := range *field(objs) {
				if err := upsert(s, obj); err != nil {
					return err
				}
			}
			return nil
		},
		is: func(obj any) bool { _, ok := obj.(T); return ok },
	}
}

// newOf is a new, empty object of the pointer type T.
func newOf[T runtime.Object]() T {
	return reflect.New(reflect.TypeFor[T]().Elem()).Interface().(T)
}

// selecting marks a kind read only for the pods it selects, in the
// namespaces of the pods placed; selector is what it selects them by.
func selecting[T runtime.Object](k ObjectKind, selector func(T) any) ObjectKind {
	k.PerNamespace = true
	k.Selector = func(obj runtime.Object) any { return selector(obj.(T)) }
	return k
}

// ObjectKinds are the kinds the engine reads, in the order NewSnapshot
// indexes them: nodes before the pods bound to them.
var ObjectKinds = []ObjectKind{
	objectKind[*corev1.Node, *corev1.NodeList]("", "nodes", true,
		func(s *Snapshot, n *corev1.Node) error { s.UpsertNode(n); return nil },
		func(s *Snapshot, n *corev1.Node) { s.DeleteNode(n.Name) },
		func(o *Objects) *[]*corev1.Node { return &o.Nodes }),
	objectKind[*corev1.Pod, *corev1.PodList]("", "pods", true,
		(*Snapshot).UpsertPod,
		func(s *Snapshot, p *corev1.Pod) { s.DeletePod(p.UID) },
		func(o *Objects) *[]*corev1.Pod { return &o.Pods }),
	objectKind[*corev1.Namespace, *corev1.NamespaceList]("", "namespaces", false,
		func(s *Snapshot, ns *corev1.Namespace) error { s.UpsertNamespace(ns); return nil },
		func(s *Snapshot, ns *corev1.Namespace) { s.DeleteNamespace(ns.Name) },
		func(o *Objects) *[]*corev1.Namespace { return &o.Namespaces }),
	objectKind[*corev1.PersistentVolumeClaim, *corev1.PersistentVolumeClaimList]("", "persistentvolumeclaims", false,
		func(s *Snapshot, c *corev1.PersistentVolumeClaim) error { s.UpsertClaim(c); return nil },
		func(s *Snapshot, c *corev1.PersistentVolumeClaim) { s.DeleteClaim(c.Namespace, c.Name) },
		func(o *Objects) *[]*corev1.PersistentVolumeClaim { return &o.Claims }),
	objectKind[*corev1.PersistentVolume, *corev1.PersistentVolumeList]("", "persistentvolumes", false,
		func(s *Snapshot, v *corev1.PersistentVolume) error { s.UpsertVolume(v); return nil },
		func(s *Snapshot, v *corev1.PersistentVolume) { s.DeleteVolume(v.Name) },
		func(o *Objects) *[]*corev1.PersistentVolume { return &o.Volumes }),
	objectKind[*storagev1.StorageClass, *storagev1.StorageClassList]("storage.k8s.io", "storageclasses", false,
		func(s *Snapshot, sc *storagev1.StorageClass) error { s.UpsertStorageClass(sc); return nil },
		func(s *Snapshot, sc *storagev1.StorageClass) { s.DeleteStorageClass(sc.Name) },
		func(o *Objects) *[]*storagev1.StorageClass { return &o.StorageClasses }),
	objectKind[*storagev1.CSINode, *storagev1.CSINodeList]("storage.k8s.io", "csinodes", false,
		func(s *Snapshot, cn *storagev1.CSINode) error { s.UpsertCSINode(cn); return nil },
		func(s *Snapshot, cn *storagev1.CSINode) { s.DeleteCSINode(cn.Name) },
		func(o *Objects) *[]*storagev1.CSINode { return &o.CSINodes }),
	objectKind[*storagev1.VolumeAttachment, *storagev1.VolumeAttachmentList]("storage.k8s.io", "volumeattachments", false,
		func(s *Snapshot, va *storagev1.VolumeAttachment) error { s.UpsertVolumeAttachment(va); return nil },
		func(s *Snapshot, va *storagev1.VolumeAttachment) { s.DeleteVolumeAttachment(va.Name) },
		func(o *Objects) *[]*storagev1.VolumeAttachment { return &o.Attachments }),
	objectKind[*storagev1.CSIDriver, *storagev1.CSIDriverList]("storage.k8s.io", "csidrivers", false,
		func(s *Snapshot, d *storagev1.CSIDriver) error { s.UpsertCSIDriver(d); return nil },
		func(s *Snapshot, d *storagev1.CSIDriver) { s.DeleteCSIDriver(d.Name) },
		func(o *Objects) *[]*storagev1.CSIDriver { return &o.CSIDrivers }),
	objectKind[*storagev1.CSIStorageCapacity, *storagev1.CSIStorageCapacityList]("storage.k8s.io", "csistoragecapacities", false,
		func(s *Snapshot, c *storagev1.CSIStorageCapacity) error { s.UpsertStorageCapacity(c); return nil },
		func(s *Snapshot, c *storagev1.CSIStorageCapacity) { s.DeleteStorageCapacity(c.Namespace, c.Name) },
		func(o *Objects) *[]*storagev1.CSIStorageCapacity { return &o.Capacities }),
	// What PodTopologySpread's system default constraints spread a pod by.
	selecting(objectKind[*corev1.Service, *corev1.ServiceList]("", "services", false,
		func(s *Snapshot, svc *corev1.Service) error { s.UpsertService(svc); return nil },
		func(s *Snapshot, svc *corev1.Service) { s.DeleteService(svc.Namespace, svc.Name) },
		func(o *Objects) *[]*corev1.Service { return &o.Services }),
		func(svc *corev1.Service) any { return svc.Spec.Selector }),
	selecting(objectKind[*corev1.ReplicationController, *corev1.ReplicationControllerList]("", "replicationcontrollers", false,
		(*Snapshot).UpsertReplicationController,
		func(s *Snapshot, rc *corev1.ReplicationController) {
			s.DeleteController(kindReplicationController, rc.Namespace, rc.Name)
		},
		func(o *Objects) *[]*corev1.ReplicationController { return &o.ReplicationControllers }),
		func(rc *corev1.ReplicationController) any { return rc.Spec.Selector }),
	selecting(objectKind[*appsv1.ReplicaSet, *appsv1.ReplicaSetList]("apps", "replicasets", false,
		(*Snapshot).UpsertReplicaSet,
		func(s *Snapshot, rs *appsv1.ReplicaSet) { s.DeleteController(kindReplicaSet, rs.Namespace, rs.Name) },
		func(o *Objects) *[]*appsv1.ReplicaSet { return &o.ReplicaSets }),
		func(rs *appsv1.ReplicaSet) any { return rs.Spec.Selector }),
	selecting(objectKind[*appsv1.StatefulSet, *appsv1.StatefulSetList]("apps", "statefulsets", false,
		(*Snapshot).UpsertStatefulSet,
		func(s *Snapshot, ss *appsv1.StatefulSet) { s.DeleteController(kindStatefulSet, ss.Namespace, ss.Name) },
		func(o *Objects) *[]*appsv1.StatefulSet { return &o.StatefulSets }),
		func(ss *appsv1.StatefulSet) any { return ss.Spec.Selector }),
}

// KindOfObject is the ObjectKind of obj; nil when the engine does not read
// objects of its kind.
func KindOfObject(obj any) *ObjectKind {
	for i := range ObjectKinds {
		if ObjectKinds[i].is(obj) {
			return &ObjectKinds[i]
		}
	}
	return nil
}

// Collect adds obj to the objects when the engine reads its kind, and
// reports whether it does.
func (o *Objects) Collect(obj runtime.Object) bool {
	k := KindOfObject(obj)
	if k == nil {
		return false
	}
	k.collect(o, obj)
	return true
}
