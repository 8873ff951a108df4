package placement

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

func TestSurgeAndUnavailable(t *testing.T) {
	rolling := func(surge, unavailable *intstr.IntOrString) appsv1.DeploymentStrategy {
		return appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: surge, MaxUnavailable: unavailable}}
	}
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	num := func(n int) *intstr.IntOrString { v := intstr.FromInt32(int32(n)); return &v }
	cases := []struct {
		name                  string
		strategy              appsv1.DeploymentStrategy
		replicas              int32
		wantSurge, wantUnavai int
	}{
		{"defaults with 2 replicas: surge rounds up to 1, unavailable down to 0", appsv1.DeploymentStrategy{}, 2, 1, 0},
		{"defaults with 4 replicas", appsv1.DeploymentStrategy{}, 4, 1, 1},
		{"defaults with 10 replicas", appsv1.DeploymentStrategy{}, 10, 3, 2},
		{"50% unavailable of 2", rolling(nil, pct("50%")), 2, 1, 1},
		{"both zero becomes one unavailable", rolling(num(0), num(0)), 3, 0, 1},
		{"surge 0 with 25% of 2 unavailable", rolling(num(0), nil), 2, 0, 1},
		{"absolute numbers", rolling(num(2), num(3)), 5, 2, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, u, err := SurgeAndUnavailable(tc.strategy, tc.replicas)
			if err != nil {
				t.Fatal(err)
			}
			if s != tc.wantSurge || u != tc.wantUnavai {
				t.Fatalf("got surge %d unavailable %d, want %d and %d", s, u, tc.wantSurge, tc.wantUnavai)
			}
		})
	}
}

// deployment returns a Deployment workload of the pods in objs labelled
// app=name, rolling out template.
func deployment(objs Objects, name string, replicas int32, strategy appsv1.DeploymentStrategy, tmpl ...podOpt) *Workload {
	w := &Workload{Kind: pgv1.KindDeployment, Namespace: "ns", Name: name, Replicas: replicas, Strategy: strategy}
	p := mkPod("ns", "template", append([]podOpt{withLabels("app", name)}, tmpl...)...)
	w.Template = corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: p.Labels}, Spec: p.Spec}
	for _, pod := range objs.Pods {
		if pod.Labels["app"] == name {
			w.Pods = append(w.Pods, pod.UID)
		}
	}
	return w
}

func unavailable(n int) appsv1.DeploymentStrategy {
	v := intstr.FromInt32(int32(n))
	return appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &v}}
}

func TestSimulateDeploymentRollout(t *testing.T) {
	web := map[string]string{"app": "web"}
	hard := antiAffinity(term(corev1.LabelHostname, web))
	twoWebOnTwoNodes := func(extraNodes ...*corev1.Node) Objects {
		return Objects{
			Nodes: append([]*corev1.Node{mkNode("node0"), mkNode("node1")}, extraNodes...),
			Pods: []*corev1.Pod{
				mkPod("ns", "web-a", on("node0"), withLabels("app", "web"), hard),
				mkPod("ns", "web-b", on("node1"), withLabels("app", "web"), hard),
			},
		}
	}
	cases := []struct {
		name        string
		objs        Objects
		workload    func(Objects) *Workload
		wantDone    bool
		wantMessage string
	}{
		{
			name:        "incident 001: default strategy, 2 replicas, 2 nodes, hard anti-affinity deadlocks",
			objs:        twoWebOnTwoNodes(),
			workload:    func(o Objects) *Workload { return deployment(o, "web", 2, appsv1.DeploymentStrategy{}, hard) },
			wantMessage: "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules.",
		},
		{
			name:     "incident 001 fixed: maxUnavailable 1 lets an old pod go first",
			objs:     twoWebOnTwoNodes(),
			workload: func(o Objects) *Workload { return deployment(o, "web", 2, unavailable(1), hard) },
			wantDone: true,
		},
		{
			// An old pod's extended resource is freed when it goes, as its
			// CPU is: each node has one device, each pod takes it.
			name: "an old pod's extended resource is free for its replacement",
			objs: func() Objects {
				o := twoWebOnTwoNodes()
				for _, n := range o.Nodes {
					n.Status.Allocatable["example.com/gpu"] = resource.MustParse("1")
				}
				for _, p := range o.Pods {
					oneGPU(p)
				}
				return o
			}(),
			workload: func(o Objects) *Workload { return deployment(o, "web", 2, unavailable(1), hard, oneGPU) },
			wantDone: true,
		},
		{
			// The end of the last rollout: the scheduler counts the pod
			// being deleted until it goes, and the new pod waits for it.
			name: "the workload's own pods being deleted delay a rollout, they do not stop it",
			objs: func() Objects {
				o := twoWebOnTwoNodes()
				o.Pods = append(o.Pods, mkPod("ns", "web-old", on("node0"), withLabels("app", "web"), terminating()),
					mkPod("ns", "web-older", on("node1"), withLabels("app", "web"), terminating()))
				return o
			}(),
			workload: func(o Objects) *Workload { return deployment(o, "web", 2, unavailable(1), hard) },
			wantDone: true,
		},
		{
			// As the operator hands it over: only the live pods, the old
			// ReplicaSet's leaving pods found by the selector.
			name: "pods being deleted that the workload's selector selects delay a rollout, they do not stop it",
			objs: func() Objects {
				o := twoWebOnTwoNodes()
				o.Pods = append(o.Pods, mkPod("ns", "web-old", on("node0"), withLabels("app", "web"), terminating()))
				return o
			}(),
			workload: func(o Objects) *Workload {
				w := deployment(o, "web", 2, unavailable(1), hard)
				w.Pods = w.Pods[:2]
				w.Selector = &metav1.LabelSelector{MatchLabels: web}
				return w
			},
			wantDone: true,
		},
		{
			name: "another workload's pod being deleted still counts",
			objs: func() Objects {
				o := twoWebOnTwoNodes()
				o.Pods = append(o.Pods, mkPod("ns", "web-other", on("node0"), withLabels("app", "web", "owner", "other"), terminating()),
					mkPod("ns", "web-other2", on("node1"), withLabels("app", "web", "owner", "other"), terminating()))
				return o
			}(),
			workload: func(o Objects) *Workload {
				w := deployment(o, "web", 2, unavailable(1), hard)
				w.Pods = w.Pods[:2]
				return w
			},
			wantMessage: "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules.",
		},
		{
			name: "incident 001 fixed: maxSurge 0 makes room before creating",
			objs: twoWebOnTwoNodes(),
			workload: func(o Objects) *Workload {
				zero := intstr.FromInt32(0)
				return deployment(o, "web", 2, appsv1.DeploymentStrategy{RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &zero}}, hard)
			},
			wantDone: true,
		},
		{
			name:     "incident 001 fixed: a third node takes the surge pod",
			objs:     twoWebOnTwoNodes(mkNode("node2")),
			workload: func(o Objects) *Workload { return deployment(o, "web", 2, appsv1.DeploymentStrategy{}, hard) },
			wantDone: true,
		},
		{
			name: "Recreate removes every old pod before creating",
			objs: twoWebOnTwoNodes(),
			workload: func(o Objects) *Workload {
				return deployment(o, "web", 2, appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}, hard)
			},
			wantDone: true,
		},
		{
			name: "old pods' required anti-affinity still repels the surge pod of a soft template",
			objs: twoWebOnTwoNodes(),
			workload: func(o Objects) *Workload {
				return deployment(o, "web", 2, appsv1.DeploymentStrategy{}, func(p *corev1.Pod) {
					p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100, PodAffinityTerm: term(corev1.LabelHostname, web)}},
					}}
				})
			},
			wantMessage: "0/2 nodes are available: 2 node(s) didn't satisfy existing pods anti-affinity rules.",
		},
		{
			name: "a soft anti-affinity on pods without one never blocks",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("node0"), mkNode("node1")},
				Pods: []*corev1.Pod{
					mkPod("ns", "web-a", on("node0"), withLabels("app", "web")),
					mkPod("ns", "web-b", on("node0"), withLabels("app", "web")),
				},
			},
			workload: func(o Objects) *Workload {
				return deployment(o, "web", 2, appsv1.DeploymentStrategy{}, func(p *corev1.Pod) {
					p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100, PodAffinityTerm: term(corev1.LabelHostname, web)}},
					}}
				})
			},
			wantDone: true,
		},
		{
			name: "incident 000: the graph DB's new pod needs a second data node",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("data-1", label("role", "data"))},
				Pods: []*corev1.Pod{
					mkPod("ns", "search-0", on("data-1"), withLabels("app", "search")),
					mkPod("ns", "graphdb-0", on("data-1"), withLabels("app", "graphdb")),
				},
			},
			workload: func(o Objects) *Workload {
				return deployment(o, "graphdb", 1, appsv1.DeploymentStrategy{}, nodeSelector("role", "data"),
					antiAffinity(term(corev1.LabelHostname, map[string]string{"app": "search"})))
			},
			wantMessage: "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules.",
		},
		{
			name: "incident 000 with the second data node: the rollout completes",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("data-1", label("role", "data")), mkNode("data-2", label("role", "data"))},
				Pods: []*corev1.Pod{
					mkPod("ns", "search-0", on("data-1"), withLabels("app", "search")),
					mkPod("ns", "graphdb-0", on("data-1"), withLabels("app", "graphdb")),
				},
			},
			workload: func(o Objects) *Workload {
				return deployment(o, "graphdb", 1, appsv1.DeploymentStrategy{}, nodeSelector("role", "data"),
					antiAffinity(term(corev1.LabelHostname, map[string]string{"app": "search"})))
			},
			wantDone: true,
		},
		{
			name: "a hard zone spread of 6 replicas over 3 zones completes with surge",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a1", zone("a")), mkNode("a2", zone("a")), mkNode("b1", zone("b")), mkNode("b2", zone("b")), mkNode("c1", zone("c")), mkNode("c2", zone("c"))},
				Pods: []*corev1.Pod{
					mkPod("ns", "web-1", on("a1"), withLabels("app", "web")), mkPod("ns", "web-2", on("a1"), withLabels("app", "web")),
					mkPod("ns", "web-3", on("a2"), withLabels("app", "web")), mkPod("ns", "web-4", on("a2"), withLabels("app", "web")),
					mkPod("ns", "web-5", on("b1"), withLabels("app", "web")), mkPod("ns", "web-6", on("b1"), withLabels("app", "web")),
				},
			},
			workload: func(o Objects) *Workload {
				return deployment(o, "web", 6, appsv1.DeploymentStrategy{},
					spread(corev1.LabelTopologyZone, 1, web, matchLabelKeys(appsv1.DefaultDeploymentUniqueLabelKey)))
			},
			wantDone: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSnapshot(tc.objs)
			if err != nil {
				t.Fatal(err)
			}
			w := tc.workload(tc.objs)
			r, err := s.SimulateRollout(w)
			if err != nil {
				t.Fatal(err)
			}
			if r.Completes != tc.wantDone {
				t.Fatalf("completes = %t, want %t; steps %+v; blocked %+v", r.Completes, tc.wantDone, r.Steps, r.Blocked)
			}
			live := 0
			for _, p := range tc.objs.Pods {
				if slices.Contains(w.Pods, p.UID) && p.DeletionTimestamp == nil {
					live++
				}
			}
			if len(r.Recreates) != live {
				t.Fatalf("recreates %v, want every one of the %d old pods not already being deleted", r.Recreates, live)
			}
			if tc.wantMessage != "" {
				if r.Blocked == nil || r.Blocked.Message != tc.wantMessage {
					t.Fatalf("blocked = %+v, want message %q", r.Blocked, tc.wantMessage)
				}
			}
			// The snapshot itself is never changed by a simulation.
			if got := s.PodCount(); got != len(tc.objs.Pods) {
				t.Fatalf("snapshot has %d pods after the simulation, want %d", got, len(tc.objs.Pods))
			}
		})
	}
}

func TestSimulateStatefulSetRollout(t *testing.T) {
	app := map[string]string{"app": "db"}
	pinned := pinnedToZoneC
	sts := func(o Objects, strategy appsv1.StatefulSetUpdateStrategy, tmpl ...podOpt) *Workload {
		p := mkPod("ns", "template", append([]podOpt{withLabels("app", "db")}, tmpl...)...)
		w := &Workload{Kind: pgv1.KindStatefulSet, Namespace: "ns", Name: "db", Replicas: 2, UpdateStrategy: strategy,
			Template:             corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: p.Labels}, Spec: p.Spec},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}}
		for _, pod := range o.Pods {
			w.Pods = append(w.Pods, pod.UID)
		}
		return w
	}

	t.Run("incident 002: a zone spread cannot be met by pods their volumes pin to one zone", func(t *testing.T) {
		o := pinned()
		s, _ := NewSnapshot(o)
		r, err := s.SimulateRollout(sts(o, appsv1.StatefulSetUpdateStrategy{}, spread(corev1.LabelTopologyZone, 1, app)))
		if err != nil {
			t.Fatal(err)
		}
		// db-1 goes first; its volume keeps it in zone c, where db-0 already
		// is, while zone a is empty: skew 2.
		if r.Completes || r.BlockedPod != "db-1" {
			t.Fatalf("want db-1 blocked, got %+v", r)
		}
		if !strings.Contains(r.Blocked.Message, ReasonVolumeNodeAffinity) || !strings.Contains(r.Blocked.Message, ReasonSpread) {
			t.Fatalf("message should name both the volume pin and the spread: %s", r.Blocked.Message)
		}
		if !slices.Equal(r.Recreates, []string{"db-1"}) {
			t.Fatalf("recreates %v", r.Recreates)
		}
	})
	t.Run("a pod of a scale-down still being deleted delays the rollout, it does not stop it", func(t *testing.T) {
		o := Objects{Nodes: []*corev1.Node{mkNode("n0"), mkNode("n1")}, Pods: []*corev1.Pod{
			mkPod("ns", "db-0", on("n0"), withLabels("app", "db")),
			mkPod("ns", "db-1", on("n1"), withLabels("app", "db")),
			mkPod("ns", "db-2", on("n0"), withLabels("app", "db"), terminating()),
		}}
		s, _ := NewSnapshot(o)
		w := sts(o, appsv1.StatefulSetUpdateStrategy{}, antiAffinity(term(corev1.LabelHostname, app)))
		r, err := s.SimulateRollout(w)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Completes || !slices.Equal(r.Recreates, []string{"db-0", "db-1"}) {
			t.Fatalf("want both ordinals recreated on the nodes they hold, got %+v (blocked %+v)", r, r.Blocked)
		}
	})
	t.Run("a partition recreates only the ordinals at or above it", func(t *testing.T) {
		o := pinned()
		s, _ := NewSnapshot(o)
		strategy := appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](1)}}
		r, err := s.SimulateRollout(sts(o, strategy))
		if err != nil {
			t.Fatal(err)
		}
		if !r.Completes || !slices.Equal(r.Recreates, []string{"db-1"}) {
			t.Fatalf("got %+v", r)
		}
	})
	t.Run("maxUnavailable deletes several pods at once; OrderedReady then waits at the lowest that stays Pending, Parallel goes on", func(t *testing.T) {
		// Five pods on three nodes, two sharing n0 and n1; a hard hostname
		// anti-affinity among them fits on none of the nodes the others
		// hold.
		o := Objects{Nodes: []*corev1.Node{mkNode("n0"), mkNode("n1"), mkNode("n2")}}
		for i, node := range []string{"n0", "n1", "n2", "n0", "n1"} {
			o.Pods = append(o.Pods, mkPod("ns", fmt.Sprintf("db-%d", i), on(node), withLabels("app", "db")))
		}
		apart := antiAffinity(term(corev1.LabelHostname, app))
		for _, tc := range []struct {
			policy      appsv1.PodManagementPolicyType
			unavailable intstr.IntOrString
			wantDeleted []string
			wantPending []string
		}{
			{"", intstr.FromInt32(1), []string{"db-4"}, []string{"db-4"}},
			{appsv1.OrderedReadyPodManagement, intstr.FromInt32(2), []string{"db-4", "db-3"}, []string{"db-3"}},
			{appsv1.ParallelPodManagement, intstr.FromInt32(2), []string{"db-4", "db-3"}, []string{"db-3", "db-4"}},
			{appsv1.ParallelPodManagement, intstr.FromString("50%"), []string{"db-4", "db-3"}, []string{"db-3", "db-4"}},
		} {
			s, _ := NewSnapshot(o)
			w := sts(o, appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: ptr.To(tc.unavailable)}}, apart)
			w.Replicas, w.PodManagementPolicy = 5, tc.policy
			r, err := s.SimulateRollout(w)
			if err != nil {
				t.Fatal(err)
			}
			var deleted []string
			for _, st := range r.Steps {
				if st.Action == StepDelete {
					deleted = append(deleted, st.Pod)
				}
			}
			pending := r.LeftPending()
			if r.Completes || !slices.Equal(deleted, tc.wantDeleted) || !slices.Equal(pending, tc.wantPending) || r.BlockedPod != tc.wantPending[0] {
				t.Fatalf("%s, maxUnavailable %s: deleted %v, Pending %v, blocked %s; want %v, %v", tc.policy, tc.unavailable.String(), deleted, pending, r.BlockedPod, tc.wantDeleted, tc.wantPending)
			}
		}
	})
	t.Run("Parallel: a Pending pod takes the room a later deletion frees before the pod that replaces it", func(t *testing.T) {
		// Five pods on four nodes, db-0 and db-4 sharing n0.
		o := Objects{Nodes: []*corev1.Node{mkNode("n0"), mkNode("n1"), mkNode("n2"), mkNode("n3")}}
		for i, node := range []string{"n0", "n1", "n2", "n3", "n0"} {
			o.Pods = append(o.Pods, mkPod("ns", fmt.Sprintf("db-%d", i), on(node), withLabels("app", "db")))
		}
		s, _ := NewSnapshot(o)
		w := sts(o, appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(2))}}, antiAffinity(term(corev1.LabelHostname, app)))
		w.Replicas, w.PodManagementPolicy = 5, appsv1.ParallelPodManagement
		r, err := s.SimulateRollout(w)
		if err != nil {
			t.Fatal(err)
		}
		if r.Completes || r.BlockedPod != "db-0" || !slices.Equal(r.Recreates, []string{"db-0", "db-1", "db-2", "db-3", "db-4"}) {
			t.Fatalf("db-4 takes n0 once db-0 is deleted, and db-0 stays Pending: %+v", r)
		}
	})
	t.Run("maxUnavailable 2 on room enough replaces two at a time, highest first, and completes", func(t *testing.T) {
		o := Objects{Nodes: []*corev1.Node{mkNode("n0"), mkNode("n1"), mkNode("n2"), mkNode("n3")}}
		for i, node := range []string{"n0", "n1", "n2"} {
			o.Pods = append(o.Pods, mkPod("ns", fmt.Sprintf("db-%d", i), on(node), withLabels("app", "db")))
		}
		s, _ := NewSnapshot(o)
		w := sts(o, appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(2))}}, antiAffinity(term(corev1.LabelHostname, app)))
		w.Replicas = 3
		r, err := s.SimulateRollout(w)
		if err != nil {
			t.Fatal(err)
		}
		order := actions(r)
		want := []string{"delete db-2", "delete db-1", "create db-1", "create db-2", "delete db-0", "create db-0"}
		if !r.Completes || !slices.Equal(order, want) {
			t.Fatalf("steps %v, want %v (completes %v)", order, want, r.Completes)
		}
	})
	t.Run("old pods not Ready: Parallel deletes them first, beyond the budget; OrderedReady changes nothing", func(t *testing.T) {
		notReady := func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
		}
		o := Objects{Nodes: []*corev1.Node{mkNode("n0"), mkNode("n1"), mkNode("n2"), mkNode("n3")}}
		for i, node := range []string{"n0", "n1", "n2"} {
			opts := []podOpt{on(node), withLabels("app", "db")}
			if i < 2 {
				opts = append(opts, notReady)
			}
			o.Pods = append(o.Pods, mkPod("ns", fmt.Sprintf("db-%d", i), opts...))
		}
		s, _ := NewSnapshot(o)
		for _, parallel := range []bool{true, false} {
			w := sts(o, appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(2))}}, antiAffinity(term(corev1.LabelHostname, app)))
			w.Replicas = 3
			want := []string{"delete db-1", "delete db-0", "create db-0", "create db-1", "delete db-2", "create db-2"}
			if parallel {
				w.PodManagementPolicy = appsv1.ParallelPodManagement
			} else {
				want = nil
			}
			r, err := s.SimulateRollout(w)
			if err != nil {
				t.Fatal(err)
			}
			order := actions(r)
			if r.Completes != parallel || !slices.Equal(order, want) {
				t.Errorf("parallel %v: steps %v, want %v (completes %v, %s)", parallel, order, want, r.Completes, r.Note)
			}
			if !parallel && !strings.Contains(r.Note, "db-0 is not Running and Ready") {
				t.Errorf("OrderedReady: the note should name db-0: %q", r.Note)
			}
		}
	})
	t.Run("OnDelete recreates nothing and says so", func(t *testing.T) {
		o := pinned()
		s, _ := NewSnapshot(o)
		r, err := s.SimulateRollout(sts(o, appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}, spread(corev1.LabelTopologyZone, 1, app)))
		if err != nil {
			t.Fatal(err)
		}
		if !r.Completes || len(r.Recreates) != 0 || !strings.Contains(r.Note, "OnDelete") {
			t.Fatalf("got %+v", r)
		}
	})
}

// actions are a rollout's steps as "action pod".
func actions(r Rollout) []string {
	var out []string
	for _, st := range r.Steps {
		out = append(out, st.Action+" "+st.Pod)
	}
	return out
}

func oneGPU(p *corev1.Pod) {
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{"example.com/gpu": resource.MustParse("1")}
}

// The first new pods of a Deployment's rollout are placed as the scheduler
// places them when they are created: beside the workload's pods still being
// deleted, which hold their nodes (or left Pending where none fits); the
// pods after them once those are gone.
func TestARolloutsFirstPodsSeeTheWorkloadsPodsBeingDeleted(t *testing.T) {
	sized := func(cpu string) nodeOpt { return alloc(cpu, "8Gi", "110") }
	for _, tc := range []struct {
		name      string
		liveCPU   string
		wantSteps []string
	}{
		// Without the pod being deleted node0 is the emptier node; beside
		// it, node0 is full and node1 takes the first pod.
		{"the first pod lands where the leaving pod leaves room", "500m", []string{"create 0 node1", "delete web-a"}},
		// No room anywhere beside it: the first pod waits, Pending, and
		// is placed once the pod has gone.
		{"the first pod waits while the leaving pod holds the only room", "1", []string{"create 0 -", "schedule 0 node0", "delete web-a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := Objects{
				Nodes: []*corev1.Node{mkNode("node0", sized("1")), mkNode("node1", sized("1"))},
				Pods: []*corev1.Pod{
					mkPod("ns", "web-a", on("node1"), withLabels("app", "web"), requests(tc.liveCPU, "1Gi")),
					mkPod("ns", "web-old", on("node0"), withLabels("app", "web"), requests("1", "1Gi"), terminating()),
				},
			}
			s, err := NewSnapshot(objs)
			if err != nil {
				t.Fatal(err)
			}
			w := deployment(objs, "web", 1, unavailable(0), requests("500m", "1Gi"))
			w.Pods = w.Pods[:1]
			w.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
			r, err := s.SimulateRollout(w)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, st := range r.Steps {
				node := cmp.Or(st.Node, "-")
				if st.Action == StepDelete {
					got = append(got, fmt.Sprintf("%s %s", st.Action, st.Pod))
					continue
				}
				got = append(got, fmt.Sprintf("%s %s %s", st.Action, strings.TrimPrefix(st.Pod, "web-"+newRevisionHash+"-"), node))
			}
			if !slices.Equal(got, tc.wantSteps) {
				t.Errorf("steps %v, want %v", got, tc.wantSteps)
			}
			if !r.Completes {
				t.Errorf("the leaving pod delays the rollout, it does not stop it: %+v", r)
			}
		})
	}
}

// A simulated pod of the new revision carries the label its kind's
// controller puts on it: pod-template-hash for a Deployment's, nothing for
// a StatefulSet's, whose pods the API server's matchLabelKeys never scope
// by a pod-template-hash.
func TestANewRevisionsPodCarriesItsKindsLabel(t *testing.T) {
	for kind, want := range map[pgv1.WorkloadKind]bool{pgv1.KindDeployment: true, pgv1.KindStatefulSet: false} {
		w := &Workload{Kind: kind, Namespace: "ns", Name: "db", Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}}}}
		p := newRevisionPod(w, "db-next")
		if _, has := p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; has != want || p.Labels["app"] != "db" {
			t.Errorf("%s: labels %v", kind, p.Labels)
		}
	}
}
