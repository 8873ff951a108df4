package placement

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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

func rwopClaim(name string) *corev1.PersistentVolumeClaim {
	c := mkClaim("ns", name, "fast", "pv-"+name)
	c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}
	return c
}

// VolumeRestrictions: a ReadWriteOncePod claim in use by a pod on any node
// keeps every other pod mounting it from being scheduled.
func TestFidelityReadWriteOncePod(t *testing.T) {
	storage := func(pods ...*corev1.Pod) Objects {
		return Objects{Nodes: []*corev1.Node{mkNode("a"), mkNode("b")}, Pods: pods,
			Claims:         []*corev1.PersistentVolumeClaim{rwopClaim("data")},
			Volumes:        []*corev1.PersistentVolume{{ObjectMeta: metav1.ObjectMeta{Name: "pv-data"}}},
			StorageClasses: []*storagev1.StorageClass{mkClass("fast", storagev1.VolumeBindingImmediate)}}
	}
	runFidelity(t, []fidelityCase{
		{name: "a claim in use elsewhere holds the pod back", objs: storage(mkPod("ns", "writer", on("a"), claim("data"))),
			pod:     mkPod("ns", "p", claim("data")),
			wantMsg: "0/2 nodes are available: 2 " + ReasonReadWriteOncePod + "."},
		{name: "a claim used by a pod not yet on a node is free", objs: storage(mkPod("ns", "pending", claim("data"))),
			pod: mkPod("ns", "p", claim("data")), wantNodes: []string{"a", "b"}},
		{name: "an unused claim is free", objs: storage(),
			pod: mkPod("ns", "p", claim("data")), wantNodes: []string{"a", "b"}},
	})

	// A Deployment sharing one ReadWriteOncePod claim cannot surge: the new
	// pod waits for the old one, which maxUnavailable 0 keeps.
	objs := storage(mkPod("ns", "app-a", on("a"), withLabels("app", "app"), claim("data")))
	for _, tc := range []struct {
		name     string
		strategy appsv1.DeploymentStrategy
		done     bool
	}{{"surge deadlocks", surgeOnly(), false}, {"maxUnavailable 1 completes", unavailable(1), true}} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSnapshot(objs)
			if err != nil {
				t.Fatal(err)
			}
			r, err := s.SimulateRollout(deployment(objs, "app", 1, tc.strategy, claim("data")))
			if err != nil {
				t.Fatal(err)
			}
			if r.Completes != tc.done {
				t.Fatalf("completes = %t, want %t (blocked %+v)", r.Completes, tc.done, r.Blocked)
			}
		})
	}
}

func ephemeralVolume(name string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}})
	}
}

// VolumeBinding's PreFilter messages, word for word.
func TestFidelityClaimMessages(t *testing.T) {
	lost := mkClaim("ns", "data", "fast", "pv-gone")
	lost.Status.Phase = corev1.ClaimLost
	runFidelity(t, []fidelityCase{
		{name: "an ephemeral claim not yet created", objs: Objects{Nodes: []*corev1.Node{mkNode("a")}},
			pod:     mkPod("ns", "p", ephemeralVolume("scratch")),
			wantMsg: `0/1 nodes are available: waiting for ephemeral volume controller to create the persistentvolumeclaim "p-scratch".`},
		{name: "a claim whose volume is lost", objs: Objects{Nodes: []*corev1.Node{mkNode("a")}, Claims: []*corev1.PersistentVolumeClaim{lost}},
			pod:     mkPod("ns", "p", claim("data")),
			wantMsg: `0/1 nodes are available: persistentvolumeclaim "data" bound to non-existent persistentvolume "pv-gone".`},
	})
}

// The pods a rollout creates get their ephemeral claims after they exist:
// a Deployment with an ephemeral volume rolls out.
func TestEphemeralVolumeRollout(t *testing.T) {
	objs := Objects{Nodes: []*corev1.Node{mkNode("node0"), mkNode("node1")},
		Pods: []*corev1.Pod{mkPod("ns", "web-a", on("node0"), withLabels("app", "web"))}}
	s, err := NewSnapshot(objs)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.SimulateRollout(deployment(objs, "web", 1, appsv1.DeploymentStrategy{}, ephemeralVolume("scratch")))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Completes {
		t.Fatalf("a rollout of pods with ephemeral volumes must complete: blocked %+v", r.Blocked)
	}
}
