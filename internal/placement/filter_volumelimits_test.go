package placement

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

const ebs = "ebs.csi.aws.com"

// csiNode limits each driver of the node to count volumes.
func csiNode(node string, limits map[string]int32) *storagev1.CSINode {
	cn := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: node}}
	for driver, n := range limits {
		cn.Spec.Drivers = append(cn.Spec.Drivers, storagev1.CSINodeDriver{Name: driver, NodeID: node, Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To(n)}})
	}
	return cn
}

func csiVolume(name, driver string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
			CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: "vol-" + name}}}}
}

func boundClaim(name string) *corev1.PersistentVolumeClaim {
	c := mkClaim("ns", name, "csi", "pv-"+name)
	c.Annotations = map[string]string{"pv.kubernetes.io/bind-completed": "yes"}
	return c
}

func attachment(name, node, pv string) *storagev1.VolumeAttachment {
	return &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: ebs, NodeName: node,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To(pv)}}}
}

// NodeVolumeLimits: a node's CSINode caps the volumes of each driver
// attached to it; a volume a pod there already uses is not attached again.
func TestFidelityNodeVolumeLimits(t *testing.T) {
	names := []string{"a", "b", "c", "d"}
	objs := func(limit int32, pods []*corev1.Pod, vas ...*storagev1.VolumeAttachment) Objects {
		o := Objects{Nodes: []*corev1.Node{mkNode("a"), mkNode("b")}, Pods: pods, Attachments: vas,
			CSINodes:       []*storagev1.CSINode{csiNode("a", map[string]int32{ebs: limit}), csiNode("b", map[string]int32{"other.csi": 0})},
			StorageClasses: []*storagev1.StorageClass{{ObjectMeta: metav1.ObjectMeta{Name: "csi"}, Provisioner: ebs, VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)}}}
		for _, n := range names {
			o.Claims = append(o.Claims, boundClaim(n))
			o.Volumes = append(o.Volumes, csiVolume("pv-"+n, ebs))
		}
		return o
	}
	onA := func(vols ...string) []*corev1.Pod {
		var pods []*corev1.Pod
		for _, v := range vols {
			pods = append(pods, mkPod("ns", "user-"+v, on("a"), claim(v)))
		}
		return pods
	}
	runFidelity(t, []fidelityCase{
		{name: "room for one more volume", objs: objs(2, onA("a")),
			pod: mkPod("ns", "p", claim("b")), wantNodes: []string{"a", "b"}},
		{name: "the limit reached keeps the pod off", objs: objs(2, onA("a", "b")),
			pod: mkPod("ns", "p", claim("c")), wantNodes: []string{"b"}},
		{name: "a volume a pod there uses is not attached again", objs: objs(2, onA("a", "b")),
			pod: mkPod("ns", "p", claim("b")), wantNodes: []string{"a", "b"}},
		{name: "a terminating pod's volume still counts", objs: objs(1, []*corev1.Pod{mkPod("ns", "old", on("a"), claim("a"), terminating())}),
			pod: mkPod("ns", "p", claim("b")), wantNodes: []string{"b"}},
		{name: "a VolumeAttachment without a pod counts", objs: objs(2, onA("a"), attachment("va-c", "a", "pv-c")),
			pod: mkPod("ns", "p", claim("b")), wantNodes: []string{"b"}},
		{name: "a VolumeAttachment of the pod's own volume counts it twice", objs: objs(1, nil, attachment("va-b", "a", "pv-b")),
			pod: mkPod("ns", "p", claim("b")), wantNodes: []string{"b"}},
		{name: "a claim not bound yet counts under its class's provisioner", objs: func() Objects {
			o := objs(1, onA("a"))
			o.Claims = append(o.Claims, mkClaim("ns", "new", "csi", ""))
			return o
		}(), pod: mkPod("ns", "p", claim("new")), wantNodes: []string{"b"}},
		{name: "two pods sharing a claim not bound yet count it once", objs: func() Objects {
			o := objs(1, []*corev1.Pod{mkPod("ns", "first", on("a"), claim("new"))})
			o.Claims = append(o.Claims, mkClaim("ns", "new", "csi", ""))
			return o
		}(), pod: mkPod("ns", "p", claim("new")), wantNodes: []string{"a", "b"}},
		{name: "every node full gives the scheduler's message", objs: func() Objects {
			o := objs(1, onA("a"))
			o.Nodes = o.Nodes[:1]
			return o
		}(), pod: mkPod("ns", "p", claim("b")), wantMsg: "0/1 nodes are available: 1 " + ReasonMaxVolumeCount + "."},
	})
}

// In-tree disks count as their CSI driver's, by their translated handle.
func TestFidelityNodeVolumeLimitsInTree(t *testing.T) {
	ebsPV := func(name, id string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
				AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: id}}}}
	}
	inline := func(id string) podOpt {
		return func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "disk-" + id, VolumeSource: corev1.VolumeSource{
				AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: id}}})
		}
	}
	objs := Objects{Nodes: []*corev1.Node{mkNode("a"), mkNode("b")},
		Pods:     []*corev1.Pod{mkPod("ns", "user", on("a"), inline("vol-1"))},
		CSINodes: []*storagev1.CSINode{csiNode("a", map[string]int32{ebs: 1})},
		Claims:   []*corev1.PersistentVolumeClaim{boundClaim("legacy")},
		Volumes:  []*corev1.PersistentVolume{ebsPV("pv-legacy", "vol-1"), ebsPV("pv-other", "vol-2")}}
	runFidelity(t, []fidelityCase{
		{name: "an inline disk is the in-tree claim's volume", objs: objs,
			pod: mkPod("ns", "p", claim("legacy")), wantNodes: []string{"a", "b"}},
		{name: "another inline disk goes past the limit", objs: objs,
			pod: mkPod("ns", "p", inline("vol-2")), wantNodes: []string{"b"}},
	})
}

// A StatefulSet-like rollout places pods one by one: each attaches its own
// volume, and the limit spreads them once a node is full.
func TestVolumeLimitsFollowSimulatedBinds(t *testing.T) {
	objs := Objects{Nodes: []*corev1.Node{mkNode("a")},
		CSINodes: []*storagev1.CSINode{csiNode("a", map[string]int32{ebs: 1})},
		Claims:   []*corev1.PersistentVolumeClaim{boundClaim("x"), boundClaim("y")},
		Volumes:  []*corev1.PersistentVolume{csiVolume("pv-x", ebs), csiVolume("pv-y", ebs)}}
	s, err := NewSnapshot(objs)
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.newEvaluator(mkPod("ns", "p", claim("y")))
	if err != nil {
		t.Fatal(err)
	}
	if !e.fits(0) {
		t.Fatalf("an empty node refused the first volume: %v", e.reasons(0))
	}
	first := mkPod("ns", "first", claim("x"))
	e.simulateBind(first, nil, resources{}, 0)
	if got := e.reasons(0); len(got) != 1 || got[0] != ReasonMaxVolumeCount {
		t.Fatalf("with the node's one volume taken: reasons = %v, want %q", got, ReasonMaxVolumeCount)
	}
	e.account(first, false, nil, resources{}, 0, -1)
	if !e.fits(0) {
		t.Fatalf("after the pod left the volume should be free again: %v", e.reasons(0))
	}
}

// VolumeRestrictions: an inline in-tree disk has one writer per node.
func TestFidelityDiskConflicts(t *testing.T) {
	gce := func(name string, ro bool) corev1.VolumeSource {
		return corev1.VolumeSource{GCEPersistentDisk: &corev1.GCEPersistentDiskVolumeSource{PDName: name, ReadOnly: ro}}
	}
	aws := func(id string, ro bool) corev1.VolumeSource {
		return corev1.VolumeSource{AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: id, ReadOnly: ro}}
	}
	iscsi := func(iqn string, ro bool) corev1.VolumeSource {
		return corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{TargetPortal: "10.0.0.1:3260", IQN: iqn, ReadOnly: ro}}
	}
	rbd := func(image string, ro bool, monitors ...string) corev1.VolumeSource {
		return corev1.VolumeSource{RBD: &corev1.RBDVolumeSource{CephMonitors: monitors, RBDPool: "pool", RBDImage: image, ReadOnly: ro}}
	}
	mount := func(src corev1.VolumeSource) podOpt {
		return func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "disk", VolumeSource: src})
		}
	}
	for _, tc := range []struct {
		name          string
		held, wanted  corev1.VolumeSource
		wantConflicts bool
	}{
		{"the same GCE disk read-write", gce("d", false), gce("d", false), true},
		{"the same GCE disk read-only by both", gce("d", true), gce("d", true), false},
		{"the same GCE disk read-only by one", gce("d", true), gce("d", false), true},
		{"another GCE disk", gce("d", false), gce("e", false), false},
		{"the same EBS volume, even read-only", aws("v", true), aws("v", true), true},
		{"another EBS volume", aws("v", false), aws("w", false), false},
		{"the same iSCSI target read-write", iscsi("iqn.a", false), iscsi("iqn.a", false), true},
		{"the same iSCSI target read-only by both", iscsi("iqn.a", true), iscsi("iqn.a", true), false},
		{"the same RBD image on a shared monitor", rbd("img", false, "m1", "m2"), rbd("img", false, "m2", "m3"), true},
		{"the same RBD image on other monitors", rbd("img", false, "m1"), rbd("img", false, "m2"), false},
		{"the same RBD image read-only by both", rbd("img", true, "m1"), rbd("img", true, "m1"), false},
		{"a GCE disk and an EBS volume of one name", gce("x", false), aws("x", false), false},
	} {
		want := []string{"a", "b"}
		msg := ""
		if tc.wantConflicts {
			want = []string{"b"}
		}
		runFidelity(t, []fidelityCase{{name: tc.name,
			objs:      Objects{Nodes: []*corev1.Node{mkNode("a"), mkNode("b")}, Pods: []*corev1.Pod{mkPod("ns", "holder", on("a"), mount(tc.held))}},
			pod:       mkPod("ns", "p", mount(tc.wanted)),
			wantNodes: want, wantMsg: msg}})
	}
	// Every node holding the disk: the scheduler's message.
	runFidelity(t, []fidelityCase{{name: "no node without the disk",
		objs:    Objects{Nodes: []*corev1.Node{mkNode("a")}, Pods: []*corev1.Pod{mkPod("ns", "holder", on("a"), mount(aws("v", false)))}},
		pod:     mkPod("ns", "p", mount(aws("v", false))),
		wantMsg: "0/1 nodes are available: 1 " + ReasonDiskConflict + "."}})
}

// A node at its CSI attach limit cannot take a pod with a volume to attach:
// it does not qualify as capacity, and the migration waits for another.
func TestAttachLimitsKeepNodesFromQualifying(t *testing.T) {
	objs := Objects{
		Nodes: []*corev1.Node{mkNode("data-1", label("role", "data")), mkNode("data-2", label("role", "data"))},
		Pods: []*corev1.Pod{
			mkPod("ns", "search-0", on("data-1"), withLabels("app", "search")),
			mkPod("ns", "graphdb-0", on("data-1"), withLabels("app", "graphdb"), claim("a")),
			mkPod("ns", "other", on("data-2"), withLabels("app", "other"), claim("b")),
		},
		CSINodes: []*storagev1.CSINode{csiNode("data-2", map[string]int32{ebs: 1})},
		Claims:   []*corev1.PersistentVolumeClaim{boundClaim("a"), boundClaim("b")},
		Volumes:  []*corev1.PersistentVolume{csiVolume("pv-a", ebs), csiVolume("pv-b", ebs)},
	}
	graph := withSelector(deployment(objs, "graphdb", 1, surgeOnly(), nodeSelector("role", "data"), claim("a")))
	apart := Constraint{AntiAffinity: &AntiAffinity{TopologyKey: corev1.LabelHostname, Selector: selector("app", "search")}}
	q := Question{Workloads: []*Workload{graph}, Constraint: apart, Stage: pgv1.StageHard, Capacity: CapacitySpec{NodeSelector: selector("role", "data")}}
	a := analyze(t, objs, q)
	onlyHazard(t, a, HazardInsufficientCapacity, "1 of 2 qualifying nodes (role=data)")

	objs.CSINodes = []*storagev1.CSINode{csiNode("data-2", map[string]int32{ebs: 2})}
	if a := analyze(t, objs, q); len(a.Hazards) != 0 || a.Capacity.Summary() != "2/2" {
		t.Fatalf("with room for the volume on data-2 the migration may proceed: %s %+v", a.Capacity.Summary(), a.Hazards)
	}
}

// A VolumeAttachment deleted, or moved to another node, no longer counts
// where it was.
func TestVolumeAttachmentEvents(t *testing.T) {
	s, err := NewSnapshot(Objects{Nodes: []*corev1.Node{mkNode("a")},
		CSINodes: []*storagev1.CSINode{csiNode("a", map[string]int32{ebs: 1})},
		Claims:   []*corev1.PersistentVolumeClaim{boundClaim("x"), boundClaim("y")},
		Volumes:  []*corev1.PersistentVolume{csiVolume("pv-x", ebs), csiVolume("pv-y", ebs)}})
	if err != nil {
		t.Fatal(err)
	}
	fits := func() bool {
		v, err := s.Schedule(mkPod("ns", "p", claim("y")))
		if err != nil {
			t.Fatal(err)
		}
		return v.Schedulable
	}
	s.UpsertVolumeAttachment(attachment("va-x", "a", "pv-x"))
	if fits() {
		t.Fatal("the attachment of pv-x fills node a's one slot")
	}
	s.UpsertVolumeAttachment(attachment("va-x", "b", "pv-x"))
	if !fits() {
		t.Fatal("the attachment moved to node b must free node a")
	}
	s.UpsertVolumeAttachment(attachment("va-x", "a", "pv-x"))
	s.DeleteVolumeAttachment("va-x")
	if !fits() {
		t.Fatal("a deleted attachment must free node a")
	}
}
