package placement

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// ReasonNotEnoughSpace is VolumeBinding's reason for a node where a CSI
// driver that reports storage capacity has too little for a claim.
const ReasonNotEnoughSpace = "node(s) did not have enough free storage"

// storageCapacity is what VolumeBinding's capacity check reads: the CSI
// drivers, and the CSIStorageCapacity objects by namespace/name.
type storageCapacity struct {
	drivers    map[string]*storagev1.CSIDriver
	capacities map[types.NamespacedName]*storagev1.CSIStorageCapacity
}

// enough reports whether a volume of the claim's class and size can be
// provisioned for a pod on the node, and the capacity object that says so.
// Only a CSI driver that opts in (storageCapacity: true) is checked, and
// only a claim that requests a size (else there is no object); then some
// CSIStorageCapacity of the class, whose topology holds the node, must
// report at least that much (its maximumVolumeSize when set, else its
// capacity). Of several, the one of the lowest namespace/name answers:
// the scheduler takes the first its lister gives, in no set order.
func (sc *storageCapacity) enough(class *storagev1.StorageClass, claim *corev1.PersistentVolumeClaim, node *corev1.Node) (bool, *storagev1.CSIStorageCapacity) {
	size, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return true, nil
	}
	driver, ok := sc.drivers[class.Provisioner]
	if !ok || driver.Spec.StorageCapacity == nil || !*driver.Spec.StorageCapacity {
		return true, nil
	}
	var found *storagev1.CSIStorageCapacity
	for key, c := range sc.capacities {
		if c.StorageClassName == class.Name && capacityFits(c, size.Value()) && topologyHolds(c.NodeTopology, node) {
			if found == nil || key.String() < (types.NamespacedName{Namespace: found.Namespace, Name: found.Name}).String() {
				found = c
			}
		}
	}
	return found != nil, found
}

func capacityFits(c *storagev1.CSIStorageCapacity, bytes int64) bool {
	var limit *resource.Quantity
	switch {
	case c.MaximumVolumeSize != nil:
		limit = c.MaximumVolumeSize
	default:
		limit = c.Capacity
	}
	return limit != nil && limit.Value() >= bytes
}

// topologyHolds reports whether a capacity's node topology selects the
// node; a capacity without one is available nowhere.
func topologyHolds(topology *metav1.LabelSelector, node *corev1.Node) bool {
	if topology == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(topology)
	return err == nil && sel.Matches(labels.Set(node.Labels))
}
