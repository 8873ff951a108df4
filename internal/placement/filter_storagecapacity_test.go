package placement

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// capacityIn is a CSIStorageCapacity of the class for the nodes of a zone;
// maximum is its maximumVolumeSize, "" for none.
func capacityIn(name, class, zoneName, capacity, maximum string) *storagev1.CSIStorageCapacity {
	c := &storagev1.CSIStorageCapacity{
		ObjectMeta:       metav1.ObjectMeta{Namespace: "kube-system", Name: name},
		StorageClassName: class,
		NodeTopology:     &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelTopologyZone: zoneName}},
	}
	if capacity != "" {
		c.Capacity = ptr.To(resource.MustParse(capacity))
	}
	if maximum != "" {
		c.MaximumVolumeSize = ptr.To(resource.MustParse(maximum))
	}
	return c
}

func tracksCapacity(name string, tracks bool) *storagev1.CSIDriver {
	return &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.CSIDriverSpec{StorageCapacity: ptr.To(tracks)}}
}

// VolumeBinding checks, for a CSI driver that reports storage capacity,
// that a claim to provision fits the capacity reported for the node's
// topology.
func TestFidelityStorageCapacity(t *testing.T) {
	nodes := func() []*corev1.Node {
		return []*corev1.Node{mkNode("a1", zone("a")), mkNode("b1", zone("b")), mkNode("bare")}
	}
	fast := func() []*storagev1.StorageClass {
		return []*storagev1.StorageClass{mkClass("fast", storagev1.VolumeBindingWaitForFirstConsumer)}
	}
	claims := func(size string) []*corev1.PersistentVolumeClaim {
		return []*corev1.PersistentVolumeClaim{wffcClaim("data", "fast", size)}
	}
	runFidelity(t, []fidelityCase{
		{
			name: "a driver that does not report capacity provisions anywhere",
			objs: Objects{Nodes: nodes(), Claims: claims("5Gi"), StorageClasses: fast(),
				CSIDrivers: []*storagev1.CSIDriver{tracksCapacity("csi.example.com", false)},
				Capacities: []*storagev1.CSIStorageCapacity{capacityIn("a", "fast", "a", "1Gi", "")}},
			pod: mkPod("ns", "p", claim("data")), wantNodes: []string{"a1", "b1", "bare"},
		},
		{
			name: "a driver that reports it provisions where a capacity of the class holds the node and has room",
			objs: Objects{Nodes: nodes(), Claims: claims("5Gi"), StorageClasses: fast(),
				CSIDrivers: []*storagev1.CSIDriver{tracksCapacity("csi.example.com", true)},
				Capacities: []*storagev1.CSIStorageCapacity{
					capacityIn("a", "fast", "a", "10Gi", ""),
					capacityIn("b", "fast", "b", "1Gi", ""),
					capacityIn("b-other-class", "slow", "b", "100Gi", ""),
				}},
			pod: mkPod("ns", "p", claim("data")), wantNodes: []string{"a1"},
		},
		{
			name: "no capacity of the class that holds the node: not enough free storage",
			objs: Objects{Nodes: nodes(), Claims: claims("5Gi"), StorageClasses: fast(),
				CSIDrivers: []*storagev1.CSIDriver{tracksCapacity("csi.example.com", true)},
				Capacities: []*storagev1.CSIStorageCapacity{capacityIn("b", "fast", "b", "1Gi", ""), func() *storagev1.CSIStorageCapacity {
					c := capacityIn("nowhere", "fast", "a", "100Gi", "")
					c.NodeTopology = nil
					return c
				}()}},
			pod:     mkPod("ns", "p", claim("data")),
			wantMsg: "0/3 nodes are available: 3 node(s) did not have enough free storage.",
		},
		{
			name: "maximumVolumeSize decides over capacity",
			objs: Objects{Nodes: nodes(), Claims: claims("5Gi"), StorageClasses: fast(),
				CSIDrivers: []*storagev1.CSIDriver{tracksCapacity("csi.example.com", true)},
				Capacities: []*storagev1.CSIStorageCapacity{capacityIn("a", "fast", "a", "100Gi", "4Gi"), capacityIn("b", "fast", "b", "1Gi", "8Gi")}},
			pod: mkPod("ns", "p", claim("data")), wantNodes: []string{"b1"},
		},
		{
			name: "a claim that requests no size is not checked",
			objs: Objects{Nodes: nodes(), Claims: func() []*corev1.PersistentVolumeClaim {
				c := wffcClaim("data", "fast", "1Gi")
				c.Spec.Resources.Requests = nil
				return []*corev1.PersistentVolumeClaim{c}
			}(), StorageClasses: fast(), CSIDrivers: []*storagev1.CSIDriver{tracksCapacity("csi.example.com", true)}},
			pod: mkPod("ns", "p", claim("data")), wantNodes: []string{"a1", "b1", "bare"},
		},
		{
			name: "a claim being provisioned elsewhere rules a node out before another claim's capacity",
			objs: Objects{Nodes: nodes(), StorageClasses: fast(),
				Claims:     []*corev1.PersistentVolumeClaim{wffcClaim("data", "fast", "5Gi"), wffcClaim("logs", "fast", "1Gi", annSelectedNode, "b1")},
				CSIDrivers: []*storagev1.CSIDriver{tracksCapacity("csi.example.com", true)}},
			pod:     mkPod("ns", "p", claim("data"), claim("logs")),
			wantMsg: "0/3 nodes are available: 1 node(s) did not have enough free storage, 2 node(s) didn't find available persistent volumes to bind.",
		},
	})
}
