package placement

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The old pods a simulated rollout deletes are those the ReplicaSet
// controller would pick, in its order (ActivePodsWithRanks).
func TestScaleDownVictims(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	ready := func(since metav1.Time) podOpt {
		return func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: since}}
		}
	}
	notReady := func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	}
	created := func(at metav1.Time) podOpt { return func(p *corev1.Pod) { p.CreationTimestamp = at } }
	uid := func(u string) podOpt { return func(p *corev1.Pod) { p.UID = types.UID(u) } }
	cost := func(c int) podOpt {
		return func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.PodDeletionCost: fmt.Sprint(c)} }
	}
	restarted := func(n int32) podOpt {
		return func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", RestartCount: n}}
		}
	}
	old := func(name string, opts ...podOpt) *corev1.Pod {
		return mkPod("ns", name, append([]podOpt{withLabels("app", "web"), created(ago(time.Hour)), ready(ago(time.Hour))}, opts...)...)
	}
	cases := []struct {
		name  string
		pods  []*corev1.Pod
		newOn map[string]int
		// pending new pods and the running pods availability lets go.
		pending, surplus int
		// clock is whether the controller's clock is known.
		clock bool
		want  []string
	}{
		{name: "doubled up before alone", surplus: 1,
			pods: []*corev1.Pod{old("a", on("n0")), old("b", on("n1")), old("c", on("n1"))}, want: []string{"b"}},
		{name: "a new pod on the node counts as doubling up", surplus: 1, newOn: map[string]int{"n1": 1},
			pods: []*corev1.Pod{old("a", on("n0")), old("b", on("n1"))}, want: []string{"b"}},
		{name: "the ranks are taken once for the whole pass", surplus: 2,
			pods: []*corev1.Pod{old("a", on("n1")), old("b", on("n2")), old("c", on("n0")), old("d", on("n0"))}, want: []string{"c", "d"}},
		{name: "not Ready before Ready, however doubled up", surplus: 1,
			pods: []*corev1.Pod{old("a", on("n0")), old("b", on("n0")), old("c", on("n1"), notReady)}, want: []string{"c"}},
		{name: "lower deletion cost first", surplus: 1,
			pods: []*corev1.Pod{old("a", on("n0"), cost(5)), old("b", on("n0"), cost(5)), old("c", on("n1"), cost(1))}, want: []string{"c"}},
		{name: "unassigned pods go whatever availability says", surplus: 0,
			pods: []*corev1.Pod{old("a", on("n0")), old("b")}, want: []string{"b"}},
		{name: "without a clock, the more recently Ready first", surplus: 1,
			pods: []*corev1.Pod{old("a", on("n0"), ready(ago(time.Hour))), old("b", on("n1"), ready(ago(time.Minute)))}, want: []string{"b"}},
		{name: "with a clock, Ready within the same power of two of age: the lower uid", surplus: 1, clock: true,
			pods: []*corev1.Pod{old("a", on("n0"), ready(ago(20*time.Second)), uid("2")), old("b", on("n1"), ready(ago(30*time.Second)), uid("1"))}, want: []string{"b"}},
		{name: "with a clock, Ready an order of two apart: the younger", surplus: 1, clock: true,
			pods: []*corev1.Pod{old("a", on("n0"), ready(ago(10*time.Second)), uid("2")), old("b", on("n1"), ready(ago(30*time.Second)), uid("1"))}, want: []string{"a"}},
		{name: "more restarts first", surplus: 1,
			pods: []*corev1.Pod{old("a", on("n0"), restarted(1)), old("b", on("n1"), restarted(4))}, want: []string{"b"}},
		{name: "created within the same power of two of age: the lower uid", surplus: 1, clock: true,
			pods: []*corev1.Pod{old("a", on("n0"), created(ago(40*time.Second)), uid("1")), old("b", on("n1"), created(ago(50*time.Second)), uid("2"))}, want: []string{"a"}},
		{name: "pods the controller cannot tell apart: name order", surplus: 1,
			pods: []*corev1.Pod{old("b", on("n1")), old("a", on("n0"))}, want: []string{"a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := Objects{Pods: tc.pods}
			for _, n := range []string{"n0", "n1", "n2"} {
				objs.Nodes = append(objs.Nodes, mkNode(n))
			}
			s, err := NewSnapshot(objs)
			if err != nil {
				t.Fatal(err)
			}
			if tc.clock {
				s.SetNow(now)
			}
			w := deployment(objs, "web", int32(len(tc.pods)), unavailable(1))
			var got []string
			newOn := map[nodeID]int{}
			for name, n := range tc.newOn {
				newOn[s.nodeByName[name]] += n
			}
			for _, id := range s.scaleDownVictims(s.workloadPods(w.Pods), newOn, tc.pending, tc.surplus, nil) {
				got = append(got, s.pods[id].name)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("victims %v, want %v", got, tc.want)
			}
		})
	}
}

// During a rollout the controller counts the new revision's pods on a node
// as doubling the old ones up, except those being deleted.
func TestScaleDownVictimsCountsTheOwnersOtherPods(t *testing.T) {
	old := func(name, node string) *corev1.Pod {
		return mkPod("ns", name, withLabels("app", "web"), on(node), func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		})
	}
	newPod := func(name, node string, deleting bool) *corev1.Pod {
		p := mkPod("ns", name, withLabels("app", "web", "rev", "new"), on(node))
		if deleting {
			p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}
		return p
	}
	objs := Objects{Pods: []*corev1.Pod{old("a", "n0"), old("b", "n1"), old("c", "n2")}}
	for _, n := range []string{"n0", "n1", "n2"} {
		objs.Nodes = append(objs.Nodes, mkNode(n))
	}
	s, err := NewSnapshot(objs)
	if err != nil {
		t.Fatal(err)
	}
	w := deployment(objs, "web", 3, unavailable(1))
	cases := []struct {
		name    string
		related []*corev1.Pod
		want    string
	}{
		{name: "no other pods: name order", want: "[a]"},
		{name: "a new pod beside b", related: []*corev1.Pod{newPod("x", "n1", false)}, want: "[b]"},
		{name: "a new pod being deleted beside b counts for nothing", related: []*corev1.Pod{newPod("x", "n1", true)}, want: "[a]"},
		{name: "two beside c outrank one beside b", related: []*corev1.Pod{newPod("x", "n1", false), newPod("y", "n2", false), newPod("z", "n2", false)}, want: "[c]"},
		{name: "a new pod on a node the snapshot lacks counts for nothing", related: []*corev1.Pod{newPod("x", "gone", false)}, want: "[a]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := fmt.Sprint(s.ScaleDownVictims(w, 1, tc.related...)); got != tc.want {
				t.Errorf("victims %s, want %s", got, tc.want)
			}
		})
	}
}

func TestDeletionCostParsedAsTheController(t *testing.T) {
	for v, want := range map[string]int64{
		"": 0, "0": 0, "7": 7, "-5": -5, "+5": 0, "007": 0, "2147483647": 2147483647, "2147483648": 0, "1e3": 0, " 1": 0,
	} {
		if got := parseDeletionCost(v); got != want {
			t.Errorf("parseDeletionCost(%q) = %d, want %d", v, got, want)
		}
	}
}
