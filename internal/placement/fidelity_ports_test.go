package placement

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

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

// A Deployment holding a host port on every node deadlocks a surge rollout
// as hard anti-affinity does (incident 001), with no anti-affinity at all.
func TestHostPortRolloutDeadlock(t *testing.T) {
	objs := webHoldingPort80()
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
	objs := webHoldingPort80()
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

// webHoldingPort80 is two web pods holding host port 80 on the only two nodes.
func webHoldingPort80() Objects {
	return Objects{
		Nodes: []*corev1.Node{mkNode("node0"), mkNode("node1")},
		Pods: []*corev1.Pod{
			mkPod("ns", "web-a", on("node0"), withLabels("app", "web"), hostPortOn(80, "", "")),
			mkPod("ns", "web-b", on("node1"), withLabels("app", "web"), hostPortOn(80, "", "")),
		},
	}
}
