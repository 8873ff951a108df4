package placement

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fidelityCase is one rule of kube-scheduler the engine once judged
// differently, reproduced on as few nodes as it takes.
type fidelityCase struct {
	name      string
	objs      Objects
	pod       *corev1.Pod
	wantNodes []string
	wantMsg   string
}

// runFidelity checks each case on the pods as given and as the operator
// caches them (TrimPod), which must keep what the rule reads.
func runFidelity(t *testing.T, cases []fidelityCase) {
	t.Helper()
	for _, tc := range cases {
		for _, trimmed := range []bool{false, true} {
			name := tc.name
			objs := tc.objs
			if trimmed {
				name += " (trimmed pods)"
				objs.Pods = nil
				for _, p := range tc.objs.Pods {
					objs.Pods = append(objs.Pods, TrimPod(p))
				}
			}
			t.Run(name, func(t *testing.T) {
				s, err := NewSnapshot(objs)
				if err != nil {
					t.Fatal(err)
				}
				v, err := s.Schedule(tc.pod)
				if err != nil {
					t.Fatal(err)
				}
				if tc.wantMsg != "" {
					if v.Schedulable {
						t.Fatalf("want unschedulable (%s), got nodes %v", tc.wantMsg, v.Nodes)
					}
					if v.Message != tc.wantMsg {
						t.Fatalf("message\n got: %s\nwant: %s", v.Message, tc.wantMsg)
					}
					return
				}
				if !slices.Equal(v.Nodes, tc.wantNodes) {
					t.Fatalf("nodes: got %v, want %v (%s)", v.Nodes, tc.wantNodes, v.Message)
				}
			})
		}
	}
}

// resize gives a running pod's first container the allocated and actuated
// cpu of an in-place resize in flight ("" leaves one unset), and the
// PodResizePending reason when there is one.
func resize(allocatedCPU, actuatedCPU, pendingReason string) podOpt {
	return func(p *corev1.Pod) {
		cs := corev1.ContainerStatus{Name: p.Spec.Containers[0].Name, Ready: true}
		if allocatedCPU != "" {
			cs.AllocatedResources = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(allocatedCPU), corev1.ResourceMemory: resource.MustParse("1Gi")}
		}
		if actuatedCPU != "" {
			cs.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(actuatedCPU), corev1.ResourceMemory: resource.MustParse("1Gi")}}
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
		if pendingReason != "" {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: pendingReason})
		} else {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue})
		}
	}
}

// The scheduler counts a pod whose resize is in flight at the largest of its
// spec, allocated and actuated requests, and ignores the spec of a resize
// marked Infeasible (component-helpers' PodRequests with UseStatusResources).
func TestFidelityResizeInFlight(t *testing.T) {
	node := func() []*corev1.Node { return []*corev1.Node{mkNode("a", alloc("2", "4Gi", "110"))} }
	runFidelity(t, []fidelityCase{
		{
			name: "a shrink in progress still holds the larger allocation",
			objs: Objects{Nodes: node(), Pods: []*corev1.Pod{
				mkPod("ns", "resizing", on("a"), requests("500m", "1Gi"), resize("1500m", "1500m", "")),
			}},
			pod:     mkPod("ns", "p", requests("1", "1Gi")),
			wantMsg: "0/1 nodes are available: 1 Insufficient cpu.",
		},
		{
			name: "a growth allocated but not yet actuated counts the allocation",
			objs: Objects{Nodes: node(), Pods: []*corev1.Pod{
				mkPod("ns", "resizing", on("a"), requests("1500m", "1Gi"), resize("1500m", "500m", "")),
			}},
			pod:     mkPod("ns", "p", requests("1", "1Gi")),
			wantMsg: "0/1 nodes are available: 1 Insufficient cpu.",
		},
		{
			name: "an Infeasible growth counts what the pod has, not its spec",
			objs: Objects{Nodes: node(), Pods: []*corev1.Pod{
				mkPod("ns", "resizing", on("a"), requests("3", "1Gi"), resize("500m", "500m", corev1.PodReasonInfeasible)),
			}},
			pod: mkPod("ns", "p", requests("1", "1Gi")), wantNodes: []string{"a"},
		},
		{
			name: "a Deferred growth counts the larger spec",
			objs: Objects{Nodes: node(), Pods: []*corev1.Pod{
				mkPod("ns", "resizing", on("a"), requests("1500m", "1Gi"), resize("500m", "500m", corev1.PodReasonDeferred)),
			}},
			pod:     mkPod("ns", "p", requests("1", "1Gi")),
			wantMsg: "0/1 nodes are available: 1 Insufficient cpu.",
		},
		{
			name: "a settled pod whose status repeats its spec counts its spec",
			objs: Objects{Nodes: node(), Pods: []*corev1.Pod{
				mkPod("ns", "settled", on("a"), requests("1", "1Gi"), resize("1", "1", "")),
			}},
			pod: mkPod("ns", "p", requests("1", "1Gi")), wantNodes: []string{"a"},
		},
	})
}

// localVolume is a static volume of the class on one node, Available.
func localVolume(name, class, node, size string, modes ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolume {
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName: class,
			Capacity:         corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes:      modes,
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeAvailable},
	}
}

// wffcClaim is an unbound claim of a WaitForFirstConsumer class.
func wffcClaim(name, class, size string, annotations ...string) *corev1.PersistentVolumeClaim {
	c := mkClaim("ns", name, class, "")
	c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	c.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}
	for i := 0; i+1 < len(annotations); i += 2 {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[annotations[i]] = annotations[i+1]
	}
	return c
}

func staticClass(name string) *storagev1.StorageClass {
	c := mkClass(name, storagev1.VolumeBindingWaitForFirstConsumer)
	c.Provisioner = noProvisioner
	return c
}

func zonalClass(name string, zones ...string) *storagev1.StorageClass {
	c := mkClass(name, storagev1.VolumeBindingWaitForFirstConsumer)
	c.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: corev1.LabelTopologyZone, Values: zones}}}}
	return c
}

func hostname(n string) nodeOpt { return label(corev1.LabelHostname, n) }

// VolumeBinding judges an unbound WaitForFirstConsumer claim per node: it
// must find an available volume there, or be provisionable there.
func TestFidelityWaitForFirstConsumer(t *testing.T) {
	twoNodes := func() []*corev1.Node { return []*corev1.Node{mkNode("a", hostname("a")), mkNode("b", hostname("b"))} }
	runFidelity(t, []fidelityCase{
		{
			name: "a static class with no volume binds nowhere",
			objs: Objects{Nodes: twoNodes(), Claims: []*corev1.PersistentVolumeClaim{wffcClaim("data", "local", "1Gi")},
				StorageClasses: []*storagev1.StorageClass{staticClass("local")}},
			pod:     mkPod("ns", "p", claim("data")),
			wantMsg: "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind.",
		},
		{
			name: "a static class binds where its available volume is",
			objs: Objects{Nodes: twoNodes(), Claims: []*corev1.PersistentVolumeClaim{wffcClaim("data", "local", "1Gi")},
				Volumes:        []*corev1.PersistentVolume{localVolume("pv-a", "local", "a", "10Gi")},
				StorageClasses: []*storagev1.StorageClass{staticClass("local")}},
			pod: mkPod("ns", "p", claim("data")), wantNodes: []string{"a"},
		},
		{
			name: "a volume too small, of another access mode, bound elsewhere or not Available does not match",
			objs: Objects{Nodes: twoNodes(), Claims: []*corev1.PersistentVolumeClaim{wffcClaim("data", "local", "5Gi")},
				Volumes: []*corev1.PersistentVolume{
					localVolume("small", "local", "a", "1Gi"),
					localVolume("rox", "local", "a", "10Gi", corev1.ReadOnlyMany),
					func() *corev1.PersistentVolume {
						v := localVolume("taken", "local", "b", "10Gi")
						v.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "other", Name: "theirs"}
						return v
					}(),
					func() *corev1.PersistentVolume {
						v := localVolume("released", "local", "b", "10Gi")
						v.Status.Phase = corev1.VolumeReleased
						return v
					}(),
				},
				StorageClasses: []*storagev1.StorageClass{staticClass("local")}},
			pod:     mkPod("ns", "p", claim("data")),
			wantMsg: "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind.",
		},
		{
			name: "two claims of one pod do not share a volume",
			objs: Objects{Nodes: twoNodes(),
				Claims:         []*corev1.PersistentVolumeClaim{wffcClaim("data", "local", "1Gi"), wffcClaim("logs", "local", "1Gi")},
				Volumes:        []*corev1.PersistentVolume{localVolume("pv-a", "local", "a", "10Gi"), localVolume("pv-b1", "local", "b", "10Gi"), localVolume("pv-b2", "local", "b", "10Gi")},
				StorageClasses: []*storagev1.StorageClass{staticClass("local")}},
			pod: mkPod("ns", "p", claim("data"), claim("logs")), wantNodes: []string{"b"},
		},
		{
			name: "a class's allowedTopologies keep provisioning to their zones, and off nodes without the label",
			objs: Objects{Nodes: []*corev1.Node{mkNode("a1", zone("a")), mkNode("b1", zone("b")), mkNode("bare")},
				Claims:         []*corev1.PersistentVolumeClaim{wffcClaim("data", "zonal", "1Gi")},
				StorageClasses: []*storagev1.StorageClass{zonalClass("zonal", "a")}},
			pod: mkPod("ns", "p", claim("data")), wantNodes: []string{"a1"},
		},
		{
			name: "a claim being provisioned for a node goes only there",
			objs: Objects{Nodes: twoNodes(),
				Claims:         []*corev1.PersistentVolumeClaim{wffcClaim("data", "fast", "1Gi", annSelectedNode, "b")},
				StorageClasses: []*storagev1.StorageClass{mkClass("fast", storagev1.VolumeBindingWaitForFirstConsumer)}},
			pod: mkPod("ns", "p", claim("data")), wantNodes: []string{"b"},
		},
	})
}

// A claim that names a volume the PV controller has not finished binding
// (no bind-completed annotation) is, to VolumeBinding, an unbound
// Immediate claim.
func TestFidelityPreBoundClaim(t *testing.T) {
	preBound := mkClaim("ns", "data", "fast", "pv-a")
	preBound.Annotations = nil
	runFidelity(t, []fidelityCase{{
		name: "a pre-bound claim without bind-completed holds the pod back",
		objs: Objects{Nodes: []*corev1.Node{mkNode("a", zone("a"))}, Claims: []*corev1.PersistentVolumeClaim{preBound},
			Volumes:        []*corev1.PersistentVolume{mkZonalVolume("pv-a", "a")},
			StorageClasses: []*storagev1.StorageClass{mkClass("fast", storagev1.VolumeBindingWaitForFirstConsumer)}},
		pod:     mkPod("ns", "p", claim("data")),
		wantMsg: "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
	}})
}

// betaZonedVolume is a bound volume labelled with the beta zone label only.
func betaZonedVolume(name, zones string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelFailureDomainBetaZone: zones}}}
}

// VolumeZone compares a volume's beta zone label with the node's GA label
// when the node lacks the beta one, accepts any of a multi-zone value, and
// passes nodes that carry no zone or region label at all.
func TestFidelityVolumeZoneLabels(t *testing.T) {
	bound := func(zones string) Objects {
		return Objects{
			Nodes:          []*corev1.Node{mkNode("a1", zone("a")), mkNode("b1", zone("b")), mkNode("c1", zone("c")), mkNode("bare", noLabel(corev1.LabelTopologyZone))},
			Claims:         []*corev1.PersistentVolumeClaim{mkClaim("ns", "data", "zonal", "pv")},
			Volumes:        []*corev1.PersistentVolume{betaZonedVolume("pv", zones)},
			StorageClasses: []*storagev1.StorageClass{mkClass("zonal", storagev1.VolumeBindingWaitForFirstConsumer)},
		}
	}
	runFidelity(t, []fidelityCase{
		{name: "a beta zone label matches the node's GA zone", objs: bound("a"),
			pod: mkPod("ns", "p", claim("data")), wantNodes: []string{"a1", "bare"}},
		{name: "a multi-zone beta label admits each of its zones", objs: bound("a__b"),
			pod: mkPod("ns", "p", claim("data")), wantNodes: []string{"a1", "b1", "bare"}},
	})
}
