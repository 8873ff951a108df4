package placement

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
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

// hostPortOn gives the pod's first container a host port.
func hostPortOn(port int32, ip string, protocol corev1.Protocol) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: 8080, HostPort: port, HostIP: ip, Protocol: protocol})
	}
}

// sidecarPort gives the pod an init container holding a host port, a
// sidecar (restartable) or not.
func sidecarPort(port int32, sidecar bool) podOpt {
	return func(p *corev1.Pod) {
		c := corev1.Container{Name: "init", Ports: []corev1.ContainerPort{{ContainerPort: 9090, HostPort: port}}}
		if sidecar {
			c.RestartPolicy = ptrTo(corev1.ContainerRestartPolicyAlways)
		}
		p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	}
}

// NodePorts: a host port (protocol, port) in use on a node keeps out a pod
// asking for it on the same IP or where either side binds every IP.
func TestFidelityNodePorts(t *testing.T) {
	nodes := func() []*corev1.Node { return []*corev1.Node{mkNode("a"), mkNode("b")} }
	holding := func(opts ...podOpt) Objects {
		return Objects{Nodes: nodes(), Pods: []*corev1.Pod{mkPod("ns", "holder", append([]podOpt{on("a")}, opts...)...)}}
	}
	runFidelity(t, []fidelityCase{
		{name: "the same port on every IP", objs: holding(hostPortOn(80, "", "")),
			pod: mkPod("ns", "p", hostPortOn(80, "", "")), wantNodes: []string{"b"}},
		{name: "another protocol does not conflict", objs: holding(hostPortOn(53, "", corev1.ProtocolUDP)),
			pod: mkPod("ns", "p", hostPortOn(53, "", corev1.ProtocolTCP)), wantNodes: []string{"a", "b"}},
		{name: "two specific IPs do not conflict", objs: holding(hostPortOn(80, "10.0.0.1", "")),
			pod: mkPod("ns", "p", hostPortOn(80, "10.0.0.2", "")), wantNodes: []string{"a", "b"}},
		{name: "a specific IP conflicts with every IP", objs: holding(hostPortOn(80, "", "")),
			pod: mkPod("ns", "p", hostPortOn(80, "10.0.0.2", "")), wantNodes: []string{"b"}},
		{name: "every IP conflicts with a specific IP", objs: holding(hostPortOn(80, "10.0.0.1", "")),
			pod: mkPod("ns", "p", hostPortOn(80, "", "")), wantNodes: []string{"b"}},
		{name: "a sidecar's port is held, a plain init container's is not", objs: holding(sidecarPort(9090, true)),
			pod: mkPod("ns", "p", sidecarPort(9090, false), hostPortOn(9090, "", "")), wantNodes: []string{"b"}},
		{name: "a finished init container holds nothing", objs: holding(sidecarPort(9090, false)),
			pod: mkPod("ns", "p", hostPortOn(9090, "", "")), wantNodes: []string{"a", "b"}},
		{name: "every node's port taken", objs: Objects{Nodes: nodes(), Pods: []*corev1.Pod{
			mkPod("ns", "h1", on("a"), hostPortOn(80, "", "")), mkPod("ns", "h2", on("b"), hostPortOn(80, "", "")),
		}}, pod: mkPod("ns", "p", hostPortOn(80, "", "")),
			wantMsg: "0/2 nodes are available: 2 node(s) didn't have free ports for the requested pod ports."},
	})
}

// NodeName pins a pod to its node; scheduling gates keep it from being
// scheduled at all.
func TestFidelityNodeNameAndGates(t *testing.T) {
	nodes := func() []*corev1.Node { return []*corev1.Node{mkNode("a"), mkNode("b")} }
	runFidelity(t, []fidelityCase{
		{name: "a pod naming a node goes there alone", objs: Objects{Nodes: nodes()},
			pod: mkPod("ns", "p", on("b")), wantNodes: []string{"b"}},
		{name: "a pod naming a missing node fits nowhere", objs: Objects{Nodes: nodes()},
			pod:     mkPod("ns", "p", on("gone")),
			wantMsg: "0/2 nodes are available: 2 node(s) didn't match the requested node name."},
		{name: "a gated pod is not scheduled", objs: Objects{Nodes: nodes()},
			pod: mkPod("ns", "p", func(p *corev1.Pod) {
				p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/quota"}}
			}),
			wantMsg: GatedMessage},
	})
}

// A Deployment holding a host port on every node deadlocks a surge rollout
// as hard anti-affinity does (incident 001), with no anti-affinity at all.
func TestHostPortRolloutDeadlock(t *testing.T) {
	objs := Objects{
		Nodes: []*corev1.Node{mkNode("node0"), mkNode("node1")},
		Pods: []*corev1.Pod{
			mkPod("ns", "web-a", on("node0"), withLabels("app", "web"), hostPortOn(80, "", "")),
			mkPod("ns", "web-b", on("node1"), withLabels("app", "web"), hostPortOn(80, "", "")),
		},
	}
	for _, tc := range []struct {
		name     string
		strategy appsv1.DeploymentStrategy
		done     bool
	}{
		{"maxSurge 1, maxUnavailable 0 deadlocks", surgeOnly(), false},
		{"maxUnavailable 1 lets an old pod go first", unavailable(1), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSnapshot(objs)
			if err != nil {
				t.Fatal(err)
			}
			r, err := s.SimulateRollout(deployment(objs, "web", 2, tc.strategy, hostPortOn(80, "", "")))
			if err != nil {
				t.Fatal(err)
			}
			if r.Completes != tc.done {
				t.Fatalf("completes = %t, want %t (blocked %+v)", r.Completes, tc.done, r.Blocked)
			}
			if !tc.done && (r.Blocked == nil || r.Blocked.Message != "0/2 nodes are available: 2 node(s) didn't have free ports for the requested pod ports.") {
				t.Fatalf("blocked = %+v", r.Blocked)
			}
		})
	}
}

func surgeOnly() appsv1.DeploymentStrategy {
	one, zero := intstr.FromInt32(1), intstr.FromInt32(0)
	return appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &one, MaxUnavailable: &zero}}
}

// The deadlock a host port causes is named for what causes it, with the fix.
func TestHostPortDeadlockHazard(t *testing.T) {
	objs := Objects{
		Nodes: []*corev1.Node{mkNode("node0"), mkNode("node1")},
		Pods: []*corev1.Pod{
			mkPod("ns", "web-a", on("node0"), withLabels("app", "web"), hostPortOn(80, "", "")),
			mkPod("ns", "web-b", on("node1"), withLabels("app", "web"), hostPortOn(80, "", "")),
		},
	}
	s, err := NewSnapshot(objs)
	if err != nil {
		t.Fatal(err)
	}
	w := deployment(objs, "web", 2, surgeOnly(), hostPortOn(80, "", ""))
	r, err := s.SimulateRollout(w)
	if err != nil {
		t.Fatal(err)
	}
	c := Constraint{AntiAffinity: &AntiAffinity{TopologyKey: corev1.LabelHostname}}
	h := s.rolloutHazard(w, c, r)
	if h == nil || h.Type != HazardRolloutDeadlock || !h.Blocking {
		t.Fatalf("want a blocking RolloutDeadlock, got %+v", h)
	}
	for _, want := range []string{"host port 80/TCP", "maxUnavailable to at least 1, or maxSurge to 0"} {
		if !strings.Contains(h.Message, want) {
			t.Errorf("message lacks %q: %s", want, h.Message)
		}
	}
}

// Pods that claim devices through DynamicResources are outside what the
// engine predicts: it says so, for information, and judges the rest.
func TestDynamicResourcesReportedAsNotPredicted(t *testing.T) {
	objs := Objects{Nodes: []*corev1.Node{mkNode("node0"), mkNode("node1"), mkNode("node2")},
		Pods: []*corev1.Pod{mkPod("ns", "gpu-a", on("node0"), withLabels("app", "gpu")), mkPod("ns", "gpu-b", on("node1"), withLabels("app", "gpu"))}}
	s, err := NewSnapshot(objs)
	if err != nil {
		t.Fatal(err)
	}
	w := deployment(objs, "gpu", 2, unavailable(1), func(p *corev1.Pod) {
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptrTo("one-gpu")}}
	})
	q := Question{Workloads: []*Workload{w}, Constraint: Constraint{AntiAffinity: &AntiAffinity{TopologyKey: corev1.LabelHostname}}, Stage: StageHard}
	for name, hazards := range map[string][]Hazard{"Findings": s.Findings(q), "Analyze": mustAnalyze(t, s, q).Hazards} {
		var found *Hazard
		for i := range hazards {
			if hazards[i].Type == HazardNotPredicted {
				found = &hazards[i]
			}
		}
		if found == nil || found.Blocking || !strings.Contains(found.Message, "DynamicResources") {
			t.Errorf("%s: want an Info NotPredicted hazard naming DynamicResources, got %+v", name, hazards)
		}
	}
}

func mustAnalyze(t *testing.T, s *Snapshot, q Question) Answer {
	t.Helper()
	a, err := s.Analyze(q)
	if err != nil {
		t.Fatal(err)
	}
	return a
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
			wantMsg: "0/2 nodes are available: node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode."},
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

func affinityToNodes(terms ...[]string) podOpt {
	return func(p *corev1.Pod) {
		var sel corev1.NodeSelector
		for _, names := range terms {
			sel.NodeSelectorTerms = append(sel.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
				{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: names}}})
		}
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &sel}}
	}
}

// NodeAffinity's PreFilter: a required affinity to node names leaves the
// other nodes out before any filter, in the scheduler's words.
func TestFidelityNodeAffinityToNames(t *testing.T) {
	nodes := func() []*corev1.Node { return []*corev1.Node{mkNode("a"), mkNode("b", cordoned()), mkNode("c")} }
	runFidelity(t, []fidelityCase{
		{name: "named nodes only", objs: Objects{Nodes: nodes()},
			pod: mkPod("ns", "p", affinityToNodes([]string{"a"}, []string{"b"})), wantNodes: []string{"a"}},
		{name: "the nodes left out are reported as such, whatever else they fail", objs: Objects{Nodes: nodes()},
			pod:     mkPod("ns", "p", affinityToNodes([]string{"b"})),
			wantMsg: "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) didn't satisfy plugin(s) [NodeAffinity]."},
		{name: "terms naming no node at all conflict", objs: Objects{Nodes: nodes()},
			pod: mkPod("ns", "p", func(p *corev1.Pod) {
				affinityToNodes([]string{"a"})(p)
				t := &p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0]
				t.MatchFields = append(t.MatchFields, corev1.NodeSelectorRequirement{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{"c"}})
			}),
			wantMsg: "0/3 nodes are available: pod affinity terms conflict."},
	})
}
