package placement

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// Each case is a rule of the kube-scheduler's filters, stated in its name,
// with the nodes the scheduler allows and, when it allows none, the message
// of its FailedScheduling event (without the preemption suffix).
func TestSchedule(t *testing.T) {
	web := map[string]string{"app": "web"}
	cases := []fidelityCase{
		{
			name: "a cordoned node is unschedulable",
			objs: Objects{Nodes: []*corev1.Node{mkNode("a", cordoned()), mkNode("b")}},
			pod:  mkPod("ns", "p"), wantNodes: []string{"b"},
		},
		{
			name: "tolerating the unschedulable taint admits a cordoned node",
			objs: Objects{Nodes: []*corev1.Node{mkNode("a", cordoned())}},
			pod:  mkPod("ns", "p", tolerate(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule)), wantNodes: []string{"a"},
		},
		{
			name: "NoSchedule and NoExecute taints filter, PreferNoSchedule does not",
			objs: Objects{Nodes: []*corev1.Node{
				mkNode("a", taint("dedicated", "db", corev1.TaintEffectNoSchedule)),
				mkNode("b", taint("evict", "", corev1.TaintEffectNoExecute)),
				mkNode("c", taint("soft", "", corev1.TaintEffectPreferNoSchedule)),
			}},
			pod: mkPod("ns", "p"), wantNodes: []string{"c"},
		},
		{
			name:    "untolerated taints everywhere",
			objs:    Objects{Nodes: []*corev1.Node{mkNode("a", taint("dedicated", "db", corev1.TaintEffectNoSchedule))}},
			pod:     mkPod("ns", "p"),
			wantMsg: "0/1 nodes are available: 1 node(s) had untolerated taint(s).",
		},
		{
			name:      "nodeSelector must match",
			objs:      Objects{Nodes: []*corev1.Node{mkNode("a", label("role", "data")), mkNode("b")}},
			pod:       mkPod("ns", "p", nodeSelector("role", "data")),
			wantNodes: []string{"a"},
		},
		{
			name:    "the first failing filter is the one reported: unschedulable before node affinity",
			objs:    Objects{Nodes: []*corev1.Node{mkNode("a", cordoned()), mkNode("b")}},
			pod:     mkPod("ns", "p", nodeSelector("role", "data")),
			wantMsg: "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) were unschedulable.",
		},
		{
			name: "requests of bound pods use up the node",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a", alloc("2", "4Gi", "110")), mkNode("b", alloc("2", "4Gi", "110"))},
				Pods:  []*corev1.Pod{mkPod("ns", "big", on("a"), requests("1500m", "1Gi"))},
			},
			pod: mkPod("ns", "p", requests("1", "1Gi")), wantNodes: []string{"b"},
		},
		{
			name: "cpu and memory both short are both reported",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a", alloc("1", "1Gi", "110"))},
				Pods:  []*corev1.Pod{mkPod("ns", "big", on("a"), requests("800m", "900Mi"))},
			},
			pod:     mkPod("ns", "p", requests("500m", "500Mi")),
			wantMsg: "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory.",
		},
		{
			name: "a full node has too many pods",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a", alloc("8", "8Gi", "1"))},
				Pods:  []*corev1.Pod{mkPod("ns", "x", on("a"))},
			},
			pod:     mkPod("ns", "p"),
			wantMsg: "0/1 nodes are available: 1 Too many pods.",
		},
		{
			name: "incident 001: the surge pod of a 2-replica hard hostname anti-affinity on 2 nodes",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("node0"), mkNode("node1")},
				Pods: []*corev1.Pod{
					mkPod("ns", "web-1", on("node0"), withLabels("app", "web"), antiAffinity(term(corev1.LabelHostname, web))),
					mkPod("ns", "web-2", on("node1"), withLabels("app", "web"), antiAffinity(term(corev1.LabelHostname, web))),
				},
			},
			pod:     mkPod("ns", "web-3", withLabels("app", "web"), antiAffinity(term(corev1.LabelHostname, web))),
			wantMsg: "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules.",
		},
		{
			name: "incident 000: the graph DB kept apart from the search engine on the only data node",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("data-1", label("role", "data")), mkNode("app-1", label("role", "app"))},
				Pods:  []*corev1.Pod{mkPod("data", "search-0", on("data-1"), withLabels("app", "search"))},
			},
			pod: mkPod("data", "graphdb-0", withLabels("app", "graphdb"), nodeSelector("role", "data"),
				antiAffinity(term(corev1.LabelHostname, map[string]string{"app": "search"}))),
			wantMsg: "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) didn't match pod anti-affinity rules.",
		},
		{
			name: "an existing pod's anti-affinity repels the incoming pod",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a"), mkNode("b")},
				Pods:  []*corev1.Pod{mkPod("ns", "loner", on("a"), withLabels("app", "loner"), antiAffinity(term(corev1.LabelHostname, web)))},
			},
			pod: mkPod("ns", "web-1", withLabels("app", "web")), wantNodes: []string{"b"},
		},
		{
			name: "existing anti-affinity over zones repels from the whole zone",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a1", zone("a")), mkNode("a2", zone("a")), mkNode("b1", zone("b"))},
				Pods:  []*corev1.Pod{mkPod("ns", "loner", on("a1"), withLabels("app", "loner"), antiAffinity(term(corev1.LabelTopologyZone, web)))},
			},
			pod: mkPod("ns", "web-1", withLabels("app", "web")), wantNodes: []string{"b1"},
		},
		{
			name: "anti-affinity ignores nodes without the topology key",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a", zone("z1")), mkNode("b")},
				Pods:  []*corev1.Pod{mkPod("ns", "web-1", on("a"), withLabels("app", "web"))},
			},
			pod: mkPod("ns", "web-2", withLabels("app", "web"), antiAffinity(term(corev1.LabelTopologyZone, web))), wantNodes: []string{"b"},
		},
		{
			name: "anti-affinity sees only the pod's own namespace by default",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a"), mkNode("b")},
				Pods:  []*corev1.Pod{mkPod("other", "web-1", on("a"), withLabels("app", "web"))},
			},
			pod: mkPod("ns", "web-2", withLabels("app", "web"), antiAffinity(term(corev1.LabelHostname, web))), wantNodes: []string{"a", "b"},
		},
		{
			name: "anti-affinity namespaces list other namespaces",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a"), mkNode("b")},
				Pods:  []*corev1.Pod{mkPod("other", "web-1", on("a"), withLabels("app", "web"))},
			},
			pod: mkPod("ns", "web-2", withLabels("app", "web"), antiAffinity(term(corev1.LabelHostname, web, inNamespaces("other")))), wantNodes: []string{"b"},
		},
		{
			name: "anti-affinity namespaceSelector selects namespaces by label",
			objs: Objects{
				Nodes:      []*corev1.Node{mkNode("a"), mkNode("b"), mkNode("c")},
				Namespaces: []*corev1.Namespace{mkNamespace("team-a", "tier", "data"), mkNamespace("team-b", "tier", "web"), mkNamespace("ns")},
				Pods: []*corev1.Pod{
					mkPod("team-a", "db", on("a"), withLabels("app", "web")),
					mkPod("team-b", "fe", on("b"), withLabels("app", "web")),
				},
			},
			pod: mkPod("ns", "web-2", withLabels("app", "web"), antiAffinity(term(corev1.LabelHostname, web, nsSelector("tier", "data")))), wantNodes: []string{"b", "c"},
		},
		{
			name: "an existing pod's namespaceSelector is matched against the incoming pod's namespace labels",
			objs: Objects{
				Nodes:      []*corev1.Node{mkNode("a"), mkNode("b")},
				Namespaces: []*corev1.Namespace{mkNamespace("prod", "env", "prod"), mkNamespace("guard")},
				Pods:       []*corev1.Pod{mkPod("guard", "loner", on("a"), antiAffinity(term(corev1.LabelHostname, web, nsSelector("env", "prod"))))},
			},
			pod: mkPod("prod", "web-1", withLabels("app", "web")), wantNodes: []string{"b"},
		},
		{
			name: "required affinity needs a matching pod in the domain",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a1", zone("a")), mkNode("a2", zone("a")), mkNode("b1", zone("b"))},
				Pods:  []*corev1.Pod{mkPod("ns", "cache", on("a1"), withLabels("app", "cache"))},
			},
			pod: mkPod("ns", "web-1", withLabels("app", "web"), podAffinity(term(corev1.LabelTopologyZone, map[string]string{"app": "cache"}))), wantNodes: []string{"a1", "a2"},
		},
		{
			name: "self-affinity lets the first pod of a group start anywhere with the key",
			objs: Objects{Nodes: []*corev1.Node{mkNode("a", zone("a")), mkNode("b")}},
			pod:  mkPod("ns", "web-1", withLabels("app", "web"), podAffinity(term(corev1.LabelTopologyZone, web))), wantNodes: []string{"a"},
		},
		{
			name:    "affinity to pods that do not exist is unsatisfiable",
			objs:    Objects{Nodes: []*corev1.Node{mkNode("a", zone("a"))}},
			pod:     mkPod("ns", "web-1", withLabels("app", "web"), podAffinity(term(corev1.LabelTopologyZone, map[string]string{"app": "cache"}))),
			wantMsg: "0/1 nodes are available: 1 node(s) didn't match pod affinity rules.",
		},
		{
			name: "spread: only the emptiest zone keeps the skew within 1",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a1", zone("a")), mkNode("b1", zone("b")), mkNode("c1", zone("c"))},
				Pods:  []*corev1.Pod{mkPod("ns", "w1", on("a1"), withLabels("app", "web")), mkPod("ns", "w2", on("b1"), withLabels("app", "web"))},
			},
			pod: mkPod("ns", "w3", withLabels("app", "web"), spread(corev1.LabelTopologyZone, 1, web)), wantNodes: []string{"c1"},
		},
		{
			name: "spread: a node without the topology key is rejected with its own reason",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a1", zone("a")), mkNode("x")},
			},
			pod:       mkPod("ns", "w1", withLabels("app", "web"), spread(corev1.LabelTopologyZone, 1, web)),
			wantNodes: []string{"a1"},
		},
		{
			name: "spread: terminating pods are not counted",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a1", zone("a")), mkNode("b1", zone("b"))},
				Pods:  []*corev1.Pod{mkPod("ns", "w1", on("a1"), withLabels("app", "web"), terminating())},
			},
			pod: mkPod("ns", "w2", withLabels("app", "web"), spread(corev1.LabelTopologyZone, 1, web)), wantNodes: []string{"a1", "b1"},
		},
		{
			name: "spread: pods of other namespaces are not counted",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a1", zone("a")), mkNode("b1", zone("b"))},
				Pods:  []*corev1.Pod{mkPod("other", "w1", on("a1"), withLabels("app", "web"))},
			},
			pod: mkPod("ns", "w2", withLabels("app", "web"), spread(corev1.LabelTopologyZone, 1, web)), wantNodes: []string{"a1", "b1"},
		},
		{
			name: "spread: minDomains above the domain count makes the global minimum 0",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a1", zone("a")), mkNode("b1", zone("b"))},
				Pods:  []*corev1.Pod{mkPod("ns", "w1", on("a1"), withLabels("app", "web")), mkPod("ns", "w2", on("b1"), withLabels("app", "web"))},
			},
			pod:     mkPod("ns", "w3", withLabels("app", "web"), spread(corev1.LabelTopologyZone, 1, web, minDomains(3))),
			wantMsg: "0/2 nodes are available: 2 node(s) didn't match pod topology spread constraints.",
		},
		{
			name: "spread: nodeAffinityPolicy Honor leaves out domains the pod cannot use",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a1", zone("a"), label("role", "data")), mkNode("b1", zone("b"), label("role", "data")), mkNode("c1", zone("c"))},
				Pods:  []*corev1.Pod{mkPod("ns", "w1", on("a1"), withLabels("app", "web")), mkPod("ns", "w2", on("b1"), withLabels("app", "web"))},
			},
			pod: mkPod("ns", "w3", withLabels("app", "web"), nodeSelector("role", "data"), spread(corev1.LabelTopologyZone, 1, web)), wantNodes: []string{"a1", "b1"},
		},
		{
			name: "spread: nodeAffinityPolicy Ignore counts every domain, so the empty one pins the minimum",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a1", zone("a"), label("role", "data")), mkNode("b1", zone("b"), label("role", "data")), mkNode("c1", zone("c"))},
				Pods:  []*corev1.Pod{mkPod("ns", "w1", on("a1"), withLabels("app", "web")), mkPod("ns", "w2", on("b1"), withLabels("app", "web"))},
			},
			pod: mkPod("ns", "w3", withLabels("app", "web"), nodeSelector("role", "data"),
				spread(corev1.LabelTopologyZone, 1, web, affinityPolicy(corev1.NodeInclusionPolicyIgnore))),
			wantMsg: "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 node(s) didn't match pod topology spread constraints.",
		},
		{
			name: "spread: nodeTaintsPolicy Ignore (the default) counts a tainted empty zone",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a1", zone("a")), mkNode("b1", zone("b")), mkNode("c1", zone("c"), taint("gpu", "", corev1.TaintEffectNoSchedule))},
				Pods:  []*corev1.Pod{mkPod("ns", "w1", on("a1"), withLabels("app", "web")), mkPod("ns", "w2", on("b1"), withLabels("app", "web"))},
			},
			pod:     mkPod("ns", "w3", withLabels("app", "web"), spread(corev1.LabelTopologyZone, 1, web)),
			wantMsg: "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 node(s) didn't match pod topology spread constraints.",
		},
		{
			name: "spread: nodeTaintsPolicy Honor leaves the tainted zone out",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a1", zone("a")), mkNode("b1", zone("b")), mkNode("c1", zone("c"), taint("gpu", "", corev1.TaintEffectNoSchedule))},
				Pods:  []*corev1.Pod{mkPod("ns", "w1", on("a1"), withLabels("app", "web")), mkPod("ns", "w2", on("b1"), withLabels("app", "web"))},
			},
			pod: mkPod("ns", "w3", withLabels("app", "web"), spread(corev1.LabelTopologyZone, 1, web, taintsPolicy(corev1.NodeInclusionPolicyHonor))), wantNodes: []string{"a1", "b1"},
		},
		{
			name: "spread: ScheduleAnyway never filters",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a1", zone("a")), mkNode("b1", zone("b"))},
				Pods:  []*corev1.Pod{mkPod("ns", "w1", on("a1"), withLabels("app", "web")), mkPod("ns", "w2", on("a1"), withLabels("app", "web"))},
			},
			pod: mkPod("ns", "w3", withLabels("app", "web"), spread(corev1.LabelTopologyZone, 1, web, scheduleAnyway())), wantNodes: []string{"a1", "b1"},
		},
		{
			name: "incident 002: matchLabelKeys scopes the count to the pod's own release",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a1", zone("a")), mkNode("b1", zone("b")), mkNode("c1", zone("c"))},
				Pods: []*corev1.Pod{
					mkPod("ns", "blue-0", on("a1"), withLabels("app", "my_app", "release", "blue")),
					mkPod("ns", "blue-1", on("b1"), withLabels("app", "my_app", "release", "blue")),
				},
			},
			pod: mkPod("ns", "green-0", withLabels("app", "my_app", "release", "green"),
				spread(corev1.LabelTopologyZone, 1, map[string]string{"app": "my_app"}, matchLabelKeys("release"))),
			wantNodes: []string{"a1", "b1", "c1"},
		},
		{
			name: "incident 002: without matchLabelKeys blue pods push green into the empty zone",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a1", zone("a")), mkNode("b1", zone("b")), mkNode("c1", zone("c"))},
				Pods: []*corev1.Pod{
					mkPod("ns", "blue-0", on("a1"), withLabels("app", "my_app", "release", "blue")),
					mkPod("ns", "blue-1", on("b1"), withLabels("app", "my_app", "release", "blue")),
				},
			},
			pod:       mkPod("ns", "green-0", withLabels("app", "my_app", "release", "green"), spread(corev1.LabelTopologyZone, 1, map[string]string{"app": "my_app"})),
			wantNodes: []string{"c1"},
		},
		{
			name: "incident 002: a bound zonal volume pins the pod to its zone, where the spread refuses it",
			objs: Objects{
				Nodes:          []*corev1.Node{mkNode("a1", zone("a")), mkNode("b1", zone("b")), mkNode("c1", zone("c"))},
				Pods:           []*corev1.Pod{mkPod("ns", "green-1", on("c1"), withLabels("app", "my_app"))},
				Claims:         []*corev1.PersistentVolumeClaim{mkClaim("ns", "data-green-0", "zonal", "pv-c")},
				Volumes:        []*corev1.PersistentVolume{mkZonalVolume("pv-c", "c")},
				StorageClasses: []*storagev1.StorageClass{mkClass("zonal", storagev1.VolumeBindingWaitForFirstConsumer)},
			},
			pod:     mkPod("ns", "green-0", withLabels("app", "my_app"), claim("data-green-0"), spread(corev1.LabelTopologyZone, 1, map[string]string{"app": "my_app"})),
			wantMsg: "0/3 nodes are available: 1 node(s) didn't match pod topology spread constraints, 2 node(s) didn't match PersistentVolume's node affinity.",
		},
		{
			name: "a WaitForFirstConsumer claim not yet bound does not pin",
			objs: Objects{
				Nodes:          []*corev1.Node{mkNode("a1", zone("a")), mkNode("b1", zone("b"))},
				Claims:         []*corev1.PersistentVolumeClaim{mkClaim("ns", "data", "zonal", "")},
				StorageClasses: []*storagev1.StorageClass{mkClass("zonal", storagev1.VolumeBindingWaitForFirstConsumer)},
			},
			pod: mkPod("ns", "p", claim("data")), wantNodes: []string{"a1", "b1"},
		},
		{
			name: "an unbound Immediate claim makes the pod unschedulable before any filter",
			objs: Objects{
				Nodes:          []*corev1.Node{mkNode("a1")},
				Claims:         []*corev1.PersistentVolumeClaim{mkClaim("ns", "data", "fast", "")},
				StorageClasses: []*storagev1.StorageClass{mkClass("fast", storagev1.VolumeBindingImmediate)},
			},
			pod:     mkPod("ns", "p", claim("data")),
			wantMsg: "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
		},
		{
			name:    "a missing claim makes the pod unschedulable",
			objs:    Objects{Nodes: []*corev1.Node{mkNode("a1")}},
			pod:     mkPod("ns", "p", claim("data")),
			wantMsg: `0/1 nodes are available: persistentvolumeclaim "data" not found.`,
		},
	}
	runFidelity(t, cases)
}
