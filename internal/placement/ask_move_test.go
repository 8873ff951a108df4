package placement

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

var webSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}

func softZoneSpread() Constraint {
	return Constraint{Spread: &Spread{TopologyKey: corev1.LabelTopologyZone, MaxSkew: 1}}
}

// readyWeb is a Ready pod of app=web on node, created minutes ago.
func readyWeb(name, node string, minutes int, opts ...podOpt) *corev1.Pod {
	p := mkPod("ns", name, append([]podOpt{withLabels("app", "web"), on(node)}, opts...)...)
	p.CreationTimestamp = metav1.NewTime(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC).Add(-time.Duration(minutes) * time.Minute))
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	return p
}

func planMove(t *testing.T, nodes []*corev1.Node, pods []*corev1.Pod, movable func(*corev1.Pod) string) MovePlan {
	t.Helper()
	return planMoveOf(t, softZoneSpread(), nodes, pods, movable)
}

func planMoveOf(t *testing.T, c Constraint, nodes []*corev1.Node, pods []*corev1.Pod, movable func(*corev1.Pod) string) MovePlan {
	t.Helper()
	objs := Objects{Nodes: nodes, Pods: pods, Namespaces: []*corev1.Namespace{mkNamespace("ns")}}
	s, err := NewSnapshot(objs)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := c.Apply(&corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}, webSelector, pgv1.StageSoft)
	if err != nil {
		t.Fatal(err)
	}
	w := &Workload{Kind: pgv1.KindDeployment, Namespace: "ns", Name: "web", Replicas: int32(len(pods)), Selector: webSelector,
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: *tmpl}}
	for _, p := range pods {
		if p.Labels["app"] == "web" {
			w.Pods = append(w.Pods, p.UID)
		}
	}
	plan, err := s.PlanMove(w, c, movable)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

func TestPlanMove(t *testing.T) {
	// zones a and b hold 3 pods each on one node; zone c's two nodes joined
	// after the soft spread placed them.
	joined := []*corev1.Node{mkNode("a1", zone("a")), mkNode("b1", zone("b")), mkNode("c1", zone("c")), mkNode("c2", zone("c"))}
	stacked := func(opts ...podOpt) []*corev1.Pod {
		return []*corev1.Pod{readyWeb("a-1", "a1", 30, opts...), readyWeb("a-2", "a1", 20, opts...), readyWeb("a-3", "a1", 10, opts...),
			readyWeb("b-1", "b1", 30, opts...), readyWeb("b-2", "b1", 20, opts...), readyWeb("b-3", "b1", 10, opts...)}
	}
	annotated := func(k, v string) podOpt { return func(p *corev1.Pod) { p.Annotations = map[string]string{k: v} } }
	cases := []struct {
		name     string
		nodes    []*corev1.Node
		pods     []*corev1.Pod
		movable  func(*corev1.Pod) string
		wantMove string
		even     bool
		why      string
	}{
		{name: "3/3/0 once zone c has nodes: the youngest pod of a crowded zone moves to zone c",
			nodes: joined, pods: stacked(), wantMove: "a-3 a->c"},
		{name: "2/2/2 is as even as it gets", nodes: joined, even: true, why: "as even as moving one pod can make it",
			pods: []*corev1.Pod{readyWeb("a-1", "a1", 9), readyWeb("a-2", "a1", 9), readyWeb("b-1", "b1", 9), readyWeb("b-2", "b1", 9), readyWeb("c-1", "c1", 9), readyWeb("c-2", "c2", 9)}},
		{name: "zone c's nodes tainted: its replacement would land back in a crowded zone, so nothing moves",
			nodes: []*corev1.Node{mkNode("a1", zone("a")), mkNode("b1", zone("b")), mkNode("c1", zone("c"), taint("dedicated", "db", corev1.TaintEffectNoSchedule))},
			pods:  stacked(), even: true, why: "replacement would land in"},
		{name: "a move to a domain one pod short only swaps the crowding: nothing moves",
			nodes: []*corev1.Node{mkNode("a1", zone("a")), mkNode("b1", zone("b")), mkNode("b2", zone("b")), mkNode("c1", zone("c"), taint("dedicated", "db", corev1.TaintEffectNoSchedule))},
			pods:  []*corev1.Pod{readyWeb("a-1", "a1", 3), readyWeb("a-2", "a1", 2), readyWeb("a-3", "a1", 1), readyWeb("b-1", "b1", 3), readyWeb("b-2", "b2", 2)},
			even:  true, why: "a-3's replacement would land in b"},
		{name: "pods Karpenter must not disrupt stay", nodes: joined, pods: stacked(annotated(doNotDisruptAnnotation, "true")),
			why: "no pod of the crowded domains may move: a-3 (karpenter.sh/do-not-disrupt)"},
		{name: "pods the cluster autoscaler may not evict stay", nodes: joined, pods: stacked(annotated(safeToEvictAnnotation, "false")),
			why: "cluster-autoscaler.kubernetes.io/safe-to-evict=false"},
		{name: "pods with a claim stay: the move cannot take the volume along", nodes: joined, pods: stacked(claim("data")),
			why: "mounts a claim"},
		{name: "what the operator protects stays, and the next pod moves", nodes: joined, pods: stacked(),
			movable: func(p *corev1.Pod) string {
				if p.Name == "a-3" {
					return "protected"
				}
				return ""
			}, wantMove: "b-3 b->c"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan := planMove(t, tc.nodes, tc.pods, tc.movable)
			got := ""
			if plan.Move != nil {
				got = fmt.Sprintf("%s %s->%s", plan.Move.Pod, plan.Move.From, plan.Move.To)
			}
			if got != tc.wantMove || plan.Even != tc.even || !strings.Contains(plan.Why, tc.why) {
				t.Fatalf("move %q even=%v why %q; want %q even=%v why containing %q", got, plan.Even, plan.Why, tc.wantMove, tc.even, tc.why)
			}
		})
	}
}

// The soft form of anti-affinity leaves pods together while nodes are
// missing: once a node joins, one of two pods sharing a node moves there.
func TestPlanMoveSeparatesPodsASoftAntiAffinityLeftTogether(t *testing.T) {
	apart := Constraint{AntiAffinity: &AntiAffinity{TopologyKey: corev1.LabelHostname}}
	pods := []*corev1.Pod{readyWeb("web-1", "n1", 30), readyWeb("web-2", "n1", 10), readyWeb("web-3", "n2", 20)}
	plan := planMoveOf(t, apart, []*corev1.Node{mkNode("n1"), mkNode("n2"), mkNode("n3")}, pods, nil)
	if plan.Move == nil || plan.Move.Pod != "web-2" || plan.Move.To != "n3" {
		t.Fatalf("want web-2 moved to n3, got %+v (%s)", plan.Move, plan.Why)
	}
	plan = planMoveOf(t, apart, []*corev1.Node{mkNode("n1"), mkNode("n2")}, pods, nil)
	if plan.Move != nil || !plan.Even {
		t.Fatalf("with two nodes for three pods nothing moves, got %+v (%s)", plan.Move, plan.Why)
	}
}

// No sequence of the moves the engine plans makes the spread less even:
// each move takes a pod from a domain with at least two more pods than
// where its replacement lands, so the sum of the squared counts falls, and
// the moves end, with every domain within one pod of the others when no
// pod is kept.
func TestPlannedMovesOnlyEvenTheSpread(t *testing.T) {
	for seed := range uint64(150) {
		r := rand.New(rand.NewPCG(seed, 11))
		var nodes []*corev1.Node
		for z := range 2 + r.IntN(3) {
			for n := range 1 + r.IntN(2) {
				nodes = append(nodes, mkNode(fmt.Sprintf("%c%d", 'a'+z, n), zone(string(rune('a'+z)))))
			}
		}
		var pods []*corev1.Pod
		for i := range 2 + r.IntN(10) {
			// Stacked on the first nodes, as a soft stage leaves them when
			// the others had not joined yet.
			pods = append(pods, readyWeb(fmt.Sprintf("w%02d", i), nodes[r.IntN(1+r.IntN(len(nodes)))].Name, 100-i))
		}
		squares := func(counts map[string]int) int {
			sum := 0
			for _, c := range counts {
				sum += c * c
			}
			return sum
		}
		before := -1
		for step := 0; ; step++ {
			plan := planMove(t, nodes, pods, nil)
			if now := squares(plan.Counts); before >= 0 && now >= before {
				t.Fatalf("seed %d step %d: a move left %v, no more even than before", seed, step, plan.Counts)
			} else {
				before = now
			}
			if plan.Move == nil {
				if !plan.Even || plan.Skew > 1 {
					t.Fatalf("seed %d: the moves stopped at %v (skew %d): %s", seed, plan.Counts, plan.Skew, plan.Why)
				}
				break
			}
			if step > 40 {
				t.Fatalf("seed %d: the moves do not end", seed)
			}
			for i, p := range pods {
				if p.Name == plan.Move.Pod {
					pods[i] = readyWeb(fmt.Sprintf("m%02d", step), plan.Move.Node, 0)
					pods[i].UID = types.UID(fmt.Sprintf("moved-%d", step))
				}
			}
		}
	}
}
