package placement

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// costed is a pod of app=web on node, created at minute age before the
// epoch, carrying cost and mark when set ("" for none).
func costed(name, node string, age int, cost, mark string) *corev1.Pod {
	p := mkPod("ns", name, withLabels("app", "web"), on(node))
	p.CreationTimestamp = metav1.NewTime(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC).Add(-time.Duration(age) * time.Minute))
	if cost != "" || mark != "" {
		p.Annotations = map[string]string{}
	}
	if cost != "" {
		p.Annotations[corev1.PodDeletionCost] = cost
	}
	if mark != "" {
		p.Annotations[DeletionCostMark] = mark
	}
	return p
}

func threeZones() []*corev1.Node {
	return []*corev1.Node{mkNode("a1", zone("a")), mkNode("a2", zone("a")), mkNode("b1", zone("b")), mkNode("c1", zone("c")), mkNode("bare", noLabel(corev1.LabelTopologyZone))}
}

func planCosts(t *testing.T, pods []*corev1.Pod) CostPlan {
	t.Helper()
	objs := Objects{Nodes: threeZones(), Pods: pods}
	s, err := NewSnapshot(objs)
	if err != nil {
		t.Fatal(err)
	}
	return s.PlanDeletionCosts(deployment(objs, "web", int32(len(pods)), unavailable(1)), corev1.LabelTopologyZone)
}

func describeChanges(cs []CostChange) string {
	out := ""
	for _, c := range cs {
		if c.Cost == nil {
			out += c.Name + "=- "
			continue
		}
		out += fmt.Sprintf("%s=%d ", c.Name, *c.Cost)
	}
	return out
}

func TestPlanDeletionCosts(t *testing.T) {
	cases := []struct {
		name    string
		pods    []*corev1.Pod
		want    string
		foreign string
	}{
		{name: "each domain ranked from its oldest pod; level 0 written too, so a newcomer ranks after it",
			pods: []*corev1.Pod{costed("w1", "a1", 30, "", ""), costed("w2", "a2", 20, "", ""), costed("w3", "a1", 10, "", ""), costed("w4", "b1", 5, "", "")},
			want: "w1=0 w2=-1 w3=-2 w4=0 "},
		{name: "pods already ranked keep their order; the newcomer takes the next level, one write",
			pods: []*corev1.Pod{costed("w1", "a1", 30, "-1", "-1"), costed("w2", "a2", 40, "0", "0"), costed("w3", "a1", 1, "", "")},
			want: "w3=-2 "},
		{name: "a pod gone from the middle moves the levels above it down",
			pods: []*corev1.Pod{costed("w1", "a1", 30, "0", "0"), costed("w3", "a1", 10, "-2", "-2")},
			want: "w3=-1 "},
		{name: "a pod without a domain goes first",
			pods: []*corev1.Pod{costed("w1", "a1", 30, "0", "0"), costed("w2", "bare", 30, "", "")},
			want: "w2=-1048576 "},
		{name: "a cost someone else wrote: nothing is changed",
			pods: []*corev1.Pod{costed("w1", "a1", 30, "", ""), costed("w2", "b1", 30, "100", "")}, foreign: "w2"},
		{name: "a cost changed since placement-guard wrote it is someone else's",
			pods: []*corev1.Pod{costed("w1", "a1", 30, "5", "0")}, foreign: "w1"},
		{name: "a mark whose cost was removed is ranked afresh",
			pods: []*corev1.Pod{costed("w1", "a1", 30, "", "-3")}, want: "w1=0 "},
		{name: "pods not placed need no cost",
			pods: []*corev1.Pod{costed("w1", "a1", 30, "0", "0"), costed("w2", "", 1, "", "")}, want: ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan := planCosts(t, tc.pods)
			if plan.Foreign != tc.foreign {
				t.Fatalf("foreign %q, want %q", plan.Foreign, tc.foreign)
			}
			if got := describeChanges(plan.Changes); got != tc.want {
				t.Errorf("changes %q, want %q", got, tc.want)
			}
		})
	}
}

func TestClearDeletionCostsLeavesOthersCosts(t *testing.T) {
	pods := []*corev1.Pod{costed("ours", "a1", 1, "-1", "-1"), costed("theirs", "a1", 1, "7", ""), costed("changed", "b1", 1, "7", "-1"),
		costed("markonly", "c1", 1, "", "0"), costed("none", "c1", 1, "", "")}
	objs := Objects{Nodes: threeZones(), Pods: pods}
	s, err := NewSnapshot(objs)
	if err != nil {
		t.Fatal(err)
	}
	if got := describeChanges(s.ClearDeletionCosts(deployment(objs, "web", 5, unavailable(1)))); got != "markonly=- ours=- " {
		t.Errorf("cleared %q, want the pods carrying placement-guard's cost or a mark alone", got)
	}
}

// applyChanges writes the plan into the pods, as the operator's patches do.
func applyChanges(pods []*corev1.Pod, cs []CostChange) {
	for _, c := range cs {
		for _, p := range pods {
			if p.Name != c.Name {
				continue
			}
			if c.Cost == nil {
				delete(p.Annotations, corev1.PodDeletionCost)
				delete(p.Annotations, DeletionCostMark)
				continue
			}
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			v := strconv.Itoa(int(*c.Cost))
			p.Annotations[corev1.PodDeletionCost], p.Annotations[DeletionCostMark] = v, v
		}
	}
}

// skewOf is the largest difference of two domains' counts.
func skewOf(counts map[string]int) int {
	lo, hi := -1, 0
	for _, c := range counts {
		if lo < 0 || c < lo {
			lo = c
		}
		hi = max(hi, c)
	}
	return hi - max(lo, 0)
}

// The property the ranking exists for: through any history of pods coming
// and going, with the costs kept after each change, a scale-down by any
// number of pods, taking the lowest costs and breaking ties any way, never
// leaves a skew above the one before it or 1; a new pod costs one write,
// its own, and a kept ranking none.
func TestDeletionCostsKeepTheSpreadThroughAnyScaleDown(t *testing.T) {
	nodes := []string{"a1", "a2", "b1", "c1"}
	zoneOf := map[string]string{"a1": "a", "a2": "a", "b1": "b", "c1": "c"}
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 7))
		var pods []*corev1.Pod
		next := 0
		add := func() *corev1.Pod {
			next++
			p := costed(fmt.Sprintf("w%03d", next), nodes[r.IntN(len(nodes))], 1000-next, "", "")
			pods = append(pods, p)
			return p
		}
		for range 2 + r.IntN(8) {
			add()
		}
		applyChanges(pods, planCosts(t, pods).Changes)
		for step := range 6 {
			if r.IntN(2) == 0 || len(pods) < 2 {
				add()
				changes := planCosts(t, pods).Changes
				if len(changes) != 1 || changes[0].Name != pods[len(pods)-1].Name {
					t.Fatalf("seed %d step %d: a new pod took %q, want its own cost alone", seed, step, describeChanges(changes))
				}
				applyChanges(pods, changes)
			} else {
				i := r.IntN(len(pods))
				pods = slices.Delete(pods, i, i+1)
				applyChanges(pods, planCosts(t, pods).Changes)
			}
			if again := planCosts(t, pods).Changes; len(again) != 0 {
				t.Fatalf("seed %d step %d: a kept ranking asks for %q", seed, step, describeChanges(again))
			}
		}
		before := map[string]int{}
		for _, p := range pods {
			before[zoneOf[p.Spec.NodeName]]++
		}
		for k := 1; k < len(pods); k++ {
			order := slices.Clone(pods)
			r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			slices.SortStableFunc(order, func(a, b *corev1.Pod) int {
				ca, _ := strconv.Atoi(a.Annotations[corev1.PodDeletionCost])
				cb, _ := strconv.Atoi(b.Annotations[corev1.PodDeletionCost])
				return ca - cb
			})
			after := map[string]int{}
			for z := range before {
				after[z] = 0
			}
			for _, p := range order[k:] {
				after[zoneOf[p.Spec.NodeName]]++
			}
			if skewOf(after) > max(skewOf(before), 1) {
				t.Fatalf("seed %d: %v scaled down by %d leaves %v", seed, before, k, after)
			}
		}
	}
}
