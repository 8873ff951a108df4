package placement

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

func ready() podOpt {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
	}
}

func deletionCostOf(cost int) podOpt {
	return func(p *corev1.Pod) {
		p.Annotations = map[string]string{corev1.PodDeletionCost: fmt.Sprint(cost)}
	}
}

func rolling(surge, unavailable int) appsv1.DeploymentStrategy {
	s, u := intstr.FromInt32(int32(surge)), intstr.FromInt32(int32(unavailable))
	return appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &s, MaxUnavailable: &u}}
}

// zonal builds one node per zone name ("a", "b", ...; a name repeated adds
// a second node to that zone) and the workload's ready pods, placed per
// zone by count.
func zonal(app string, zones []string, pods map[string]int) Objects {
	var objs Objects
	perZone := map[string]int{}
	for _, z := range zones {
		perZone[z]++
		objs.Nodes = append(objs.Nodes, mkNode(fmt.Sprintf("%s%d", z, perZone[z]), zone(z)))
	}
	for _, z := range sortedKeys(pods) {
		for i := range pods[z] {
			objs.Pods = append(objs.Pods, mkPod("ns", fmt.Sprintf("%s-old-%s%d", app, z, i), on(z+"1"), withLabels("app", app), ready()))
		}
	}
	return objs
}

func sortedKeys(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// hardZoneSpread renders the hard stage of a zone spread of app's pods
// into w's template, as the operator would write it.
func hardZoneSpread(t *testing.T, w *Workload, maxSkew int32, allRevisions bool) Constraint {
	t.Helper()
	c := Constraint{Spread: &Spread{TopologyKey: corev1.LabelTopologyZone, MaxSkew: maxSkew,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": w.Name}}, AllRevisions: allRevisions}}
	c = c.ForWorkload(w.Kind)
	spec, err := c.Apply(&w.Template.Spec, w.Selector, pgv1.StageHard)
	if err != nil {
		t.Fatal(err)
	}
	w.Template.Spec = *spec
	return c
}

func endStates(t *testing.T, objs Objects, w *Workload, c Constraint) EndStates {
	t.Helper()
	return endStatesWith(t, objs, w, c, nil)
}

// endStatesWith predicts under profile, nil for the default.
func endStatesWith(t *testing.T, objs Objects, w *Workload, c Constraint, profile *Profile) EndStates {
	t.Helper()
	s, err := NewSnapshot(objs)
	if err != nil {
		t.Fatal(err)
	}
	if profile != nil {
		if err := s.SetProfile(profile); err != nil {
			t.Fatal(err)
		}
	}
	es, err := s.PredictEndStates(w, c, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !es.Exhaustive {
		t.Fatalf("the search ran out of budget after %d states", es.Explored)
	}
	return es
}

func outcomes(es EndStates) []string {
	var out []string
	for _, st := range es.States {
		out = append(out, DescribeCounts(st.NewPods))
	}
	return out
}

func TestForWorkloadScopesADeploymentSpreadToTheNewRevision(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	spreadOf := func(mod func(*Spread)) Constraint {
		s := &Spread{TopologyKey: corev1.LabelTopologyZone, MaxSkew: 1, Selector: sel}
		if mod != nil {
			mod(s)
		}
		return Constraint{Spread: s}
	}
	cases := []struct {
		name string
		c    Constraint
		kind pgv1.WorkloadKind
		want []string
	}{
		{"a Deployment's spread without matchLabelKeys counts only the new revision", spreadOf(nil), pgv1.KindDeployment, []string{appsv1.DefaultDeploymentUniqueLabelKey}},
		{"the opt-out keeps every revision counted", spreadOf(func(s *Spread) { s.AllRevisions = true }), pgv1.KindDeployment, nil},
		{"explicit matchLabelKeys are written as given", spreadOf(func(s *Spread) { s.MatchLabelKeys = []string{"release"} }), pgv1.KindDeployment, []string{"release"}},
		{"a StatefulSet replaces pods in place and counts every revision", spreadOf(nil), pgv1.KindStatefulSet, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.c.ForWorkload(tc.kind)
			if fmt.Sprint(got.Spread.MatchLabelKeys) != fmt.Sprint(tc.want) {
				t.Fatalf("matchLabelKeys = %v, want %v", got.Spread.MatchLabelKeys, tc.want)
			}
			tsc := got.Spread.SpreadConstraint(sel, pgv1.StageHard)
			if fmt.Sprint(tsc.MatchLabelKeys) != fmt.Sprint(tc.want) {
				t.Fatalf("the written spread has matchLabelKeys %v, want %v", tsc.MatchLabelKeys, tc.want)
			}
			if tc.c.Spread.MatchLabelKeys != nil && &tc.c.Spread.MatchLabelKeys[0] == &got.Spread.MatchLabelKeys[0] && len(tc.want) == 0 {
				t.Fatal("rendering must not share the spec's slices")
			}
		})
	}
	anti := Constraint{AntiAffinity: &AntiAffinity{TopologyKey: corev1.LabelHostname}}
	if got := anti.ForWorkload(pgv1.KindDeployment); got.AntiAffinity == nil || len(got.AntiAffinity.MatchLabelKeys) != 0 {
		t.Fatalf("anti-affinity is never scoped by default: it would let old and new pods share a node during the rollout: %+v", got.AntiAffinity)
	}
	desc := spreadOf(nil).ForWorkload(pgv1.KindDeployment).Describe(pgv1.StageNone, pgv1.StageHard)
	if !strings.Contains(desc, "counting only the pods of the revision being rolled out (matchLabelKeys: [pod-template-hash])") {
		t.Fatalf("the plan must say which pods are counted: %s", desc)
	}
}

// The case: 3 replicas on 3 zones, one per zone, the default
// rolling update (maxSurge 1, maxUnavailable 0) and a hard zone spread.
func TestEndStatesOfABalancedDeploymentUnderAHardZoneSpread(t *testing.T) {
	objs := zonal("rates", []string{"a", "b", "c"}, map[string]int{"a": 1, "b": 1, "c": 1})

	t.Run("counting every revision, the rollout can end skewed", func(t *testing.T) {
		w := deployment(objs, "rates", 3, appsv1.DeploymentStrategy{})
		c := hardZoneSpread(t, w, 1, true)
		es := endStates(t, objs, w, c)
		if len(es.Skewed()) == 0 {
			t.Fatalf("want a skewed end state among %v", outcomes(es))
		}
		found := false
		for _, st := range es.Skewed() {
			if st.Skew == 2 && st.NewPods["b"] == 0 || st.NewPods["a"] == 0 || st.NewPods["c"] == 0 {
				found = true
			}
		}
		if !found {
			t.Fatalf("want an end state that leaves a zone empty, got %v", outcomes(es))
		}
	})

	t.Run("counting only the new revision, every end state has one pod per zone", func(t *testing.T) {
		w := deployment(objs, "rates", 3, appsv1.DeploymentStrategy{})
		c := hardZoneSpread(t, w, 1, false)
		es := endStates(t, objs, w, c)
		if got := outcomes(es); len(got) != 1 || got[0] != "a=1, b=1, c=1" {
			t.Fatalf("got %v", got)
		}
		if es.Stuck {
			t.Fatal("the rollout cannot get stuck")
		}
	})
}

func TestEndStatesTable(t *testing.T) {
	cases := []struct {
		name     string
		zones    []string
		pods     map[string]int
		replicas int32
		strategy appsv1.DeploymentStrategy
		maxSkew  int32
		all      bool
		// filtersOnly scores no node: every feasible node is a choice.
		filtersOnly bool
		// wantSkewed says whether some end state is beyond maxSkew.
		wantSkewed bool
		// want, when set, is the exact set of end states.
		want []string
	}{
		{name: "6 replicas over 3 zones, scoped", zones: []string{"a", "b", "c"}, pods: map[string]int{"a": 2, "b": 2, "c": 2}, replicas: 6,
			want: []string{"a=2, b=2, c=2"}},
		{name: "6 replicas over 3 zones, every revision counted", zones: []string{"a", "b", "c"}, pods: map[string]int{"a": 2, "b": 2, "c": 2}, replicas: 6,
			all: true, wantSkewed: true},
		{name: "uneven start, scoped: the end is even", zones: []string{"a", "b", "c"}, pods: map[string]int{"a": 3, "b": 1}, replicas: 4, strategy: rolling(1, 1),
			want: []string{"a=1, b=1, c=2", "a=1, b=2, c=1", "a=2, b=1, c=1"}},
		{name: "maxSkew 2, scoped", zones: []string{"a", "b", "c"}, pods: map[string]int{"a": 1, "b": 1, "c": 1}, replicas: 3, maxSkew: 2,
			want: []string{"a=0, b=1, c=2", "a=0, b=2, c=1", "a=1, b=0, c=2", "a=1, b=1, c=1", "a=1, b=2, c=0", "a=2, b=0, c=1", "a=2, b=1, c=0"}},
		{name: "maxSkew 2, every revision counted, filters alone: a surge pod placed before a deletion is seen can stack a zone", zones: []string{"a", "b", "c"},
			pods: map[string]int{"a": 1, "b": 1, "c": 1}, replicas: 3, maxSkew: 2, all: true, filtersOnly: true, wantSkewed: true},
		// The scheduler's scoring (LeastAllocated and BalancedAllocation
		// over the non-zero requests) sends each surge pod to the node with
		// the fewest pods, never to the one it would stack.
		{name: "maxSkew 2, every revision counted, as the scheduler scores: no zone stacked", zones: []string{"a", "b", "c"},
			pods: map[string]int{"a": 1, "b": 1, "c": 1}, replicas: 3, maxSkew: 2, all: true,
			want: []string{"a=0, b=1, c=2", "a=0, b=2, c=1", "a=1, b=0, c=2", "a=1, b=1, c=1", "a=1, b=2, c=0", "a=2, b=0, c=1", "a=2, b=1, c=0"}},
		{name: "Recreate removes every old pod first", zones: []string{"a", "b", "c"}, pods: map[string]int{"a": 2, "b": 1}, replicas: 3,
			strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}, all: true, want: []string{"a=1, b=1, c=1"}},
		{name: "two nodes per zone, scoped", zones: []string{"a", "a", "b", "b"}, pods: map[string]int{"a": 2, "b": 2}, replicas: 4, strategy: rolling(2, 0),
			want: []string{"a=2, b=2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := zonal("web", tc.zones, tc.pods)
			w := deployment(objs, "web", tc.replicas, tc.strategy)
			c := hardZoneSpread(t, w, max(tc.maxSkew, 1), tc.all)
			var profile *Profile
			if tc.filtersOnly {
				profile = DefaultProfile()
				profile.Weights = map[string]int64{}
			}
			es := endStatesWith(t, objs, w, c, profile)
			if got := len(es.Skewed()) > 0; got != tc.wantSkewed {
				t.Fatalf("skewed = %v, want %v: %v", got, tc.wantSkewed, outcomes(es))
			}
			if tc.want != nil && fmt.Sprint(outcomes(es)) != fmt.Sprint(tc.want) {
				t.Fatalf("end states %v, want %v", outcomes(es), tc.want)
			}
		})
	}
}

func TestEndStatesOfAStatefulSetReplacedInPlace(t *testing.T) {
	objs := Objects{Nodes: []*corev1.Node{mkNode("a1", zone("a")), mkNode("b1", zone("b")), mkNode("c1", zone("c"))}}
	for i, node := range []string{"a1", "a1", "b1"} {
		objs.Pods = append(objs.Pods, mkPod("ns", fmt.Sprintf("db-%d", i), on(node), withLabels("app", "db"), ready()))
	}
	w := deployment(objs, "db", 3, appsv1.DeploymentStrategy{})
	w.Kind = pgv1.KindStatefulSet
	c := hardZoneSpread(t, w, 1, false)
	if len(c.Spread.MatchLabelKeys) != 0 {
		t.Fatal("a StatefulSet's spread counts every revision")
	}
	es := endStates(t, objs, w, c)
	if len(es.Skewed()) != 0 || es.Stuck {
		t.Fatalf("replacing pods in place keeps every end state within maxSkew: %v (stuck %v)", outcomes(es), es.Stuck)
	}
	if got := outcomes(es); fmt.Sprint(got) != "[a=1, b=1, c=1]" {
		t.Fatalf("end states %v", got)
	}

	partitioned := *w
	partitioned.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To(int32(2))}}
	es = endStates(t, objs, &partitioned, c)
	if got := outcomes(es); fmt.Sprint(got) != "[a=0, b=0, c=1 a=0, b=1, c=0]" {
		t.Fatalf("with partition 2 only db-2 is replaced, and goes to zone b or c, never to a; end states %v", got)
	}
}

func TestVictimChoicesFollowTheReplicaSetControllersRanking(t *testing.T) {
	objs := Objects{Nodes: []*corev1.Node{mkNode("n1", zone("a")), mkNode("n2", zone("b")), mkNode("n3", zone("c"))}}
	objs.Pods = []*corev1.Pod{
		mkPod("ns", "web-doubled-1", on("n1"), withLabels("app", "web"), ready()),
		mkPod("ns", "web-doubled-2", on("n1"), withLabels("app", "web"), ready()),
		mkPod("ns", "web-alone", on("n2"), withLabels("app", "web"), ready()),
		mkPod("ns", "web-costly", on("n3"), withLabels("app", "web"), ready(), deletionCostOf(100)),
		mkPod("ns", "web-unready", on("n3"), withLabels("app", "web")),
	}
	w := deployment(objs, "web", 5, appsv1.DeploymentStrategy{})
	c := hardZoneSpread(t, w, 5, true)
	s, err := NewSnapshot(objs)
	if err != nil {
		t.Fatal(err)
	}
	x, err := s.newExplorer(w, c, 100)
	if err != nil {
		t.Fatal(err)
	}
	names := func(choice []int) string {
		var out []string
		for _, k := range choice {
			out = append(out, x.old[k].name)
		}
		sort.Strings(out)
		return strings.Join(out, "+")
	}
	cases := []struct {
		n    int
		want []string
	}{
		{1, []string{"web-unready"}},
		{5, []string{"web-alone+web-costly+web-doubled-1+web-doubled-2+web-unready"}},
		// Either doubled-up pod may go: they are equal, one stands for both.
		{2, []string{"web-doubled-2+web-unready"}},
		{3, []string{"web-doubled-1+web-doubled-2+web-unready"}},
		// After the doubled-up pods, n3 holds the costly pod and the unready
		// one: 2 pods share it, more than web-alone's node.
		{4, []string{"web-alone+web-doubled-1+web-doubled-2+web-unready"}},
	}
	for _, tc := range cases {
		var got []string
		for _, choice := range x.victimChoices(tc.n) {
			got = append(got, names(choice))
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("delete %d: got %v, want %v", tc.n, got, tc.want)
		}
	}
}

func TestSpreadEndsSkewedBlocksBeforeAnyWrite(t *testing.T) {
	objs := zonal("rates", []string{"a", "b", "c"}, map[string]int{"a": 1, "b": 1, "c": 1})
	s, err := NewSnapshot(objs)
	if err != nil {
		t.Fatal(err)
	}
	w := deployment(objs, "rates", 3, appsv1.DeploymentStrategy{})
	w.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "rates"}}
	spread := func(all bool) Constraint {
		return Constraint{Spread: &Spread{TopologyKey: corev1.LabelTopologyZone, MaxSkew: 1,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "rates"}}, AllRevisions: all}}
	}
	a, err := s.Analyze(Question{Workloads: []*Workload{w}, Constraint: spread(true), Stage: pgv1.StageHard})
	if err != nil {
		t.Fatal(err)
	}
	blocking := a.Blocking()
	if len(blocking) != 1 || blocking[0].Type != HazardSpreadEndsSkewed {
		t.Fatalf("want SpreadEndsSkewed, got %+v", a.Hazards)
	}
	for _, want := range []string{"skew 2 > maxSkew 1", "remove revisionScope: AllRevisions", "pod-template-hash", "topology.kubernetes.io/zone"} {
		if !strings.Contains(blocking[0].Message, want) {
			t.Errorf("message lacks %q: %s", want, blocking[0].Message)
		}
	}

	a, err = s.Analyze(Question{Workloads: []*Workload{w}, Constraint: spread(false), Stage: pgv1.StageHard})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Hazards) != 0 {
		t.Fatalf("the default scoping is safe: %+v", a.Hazards)
	}
	es := a.EndStates[pgv1.TargetRef{Kind: pgv1.KindDeployment, Name: "rates"}]
	if !es.Proven || !strings.Contains(es.Summary(), "a=1, b=1, c=1") {
		t.Fatalf("the plan shows where the pods end: %s", es.Summary())
	}
	tsc := a.Templates[pgv1.TargetRef{Kind: pgv1.KindDeployment, Name: "rates"}].TopologySpreadConstraints
	if len(tsc) != 1 || fmt.Sprint(tsc[0].MatchLabelKeys) != "[pod-template-hash]" {
		t.Fatalf("the template the engine judged must be the one written: %+v", tsc)
	}
}

func TestRenderForLeavesASpreadOverSeveralTargetsUnscoped(t *testing.T) {
	partOf := &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/part-of": "flux"}}
	controller := func(name string) *Workload {
		return &Workload{Kind: pgv1.KindDeployment, Name: name, Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{
			Labels: map[string]string{"app": name, "app.kubernetes.io/part-of": "flux"}}}}
	}
	source, helm := controller("source"), controller("helm")
	c := Constraint{Spread: &Spread{TopologyKey: corev1.LabelHostname, MaxSkew: 1, Selector: partOf}}
	if got := c.RenderFor(source, []*Workload{source, helm}); len(got.Spread.MatchLabelKeys) != 0 {
		t.Fatalf("a spread over the set must count the set together (incident 004): %v", got.Spread.MatchLabelKeys)
	}
	if got := c.RenderFor(source, []*Workload{source}); fmt.Sprint(got.Spread.MatchLabelKeys) != "[pod-template-hash]" {
		t.Fatalf("a spread over one Deployment's pods counts its new revision: %v", got.Spread.MatchLabelKeys)
	}
	own := Constraint{Spread: &Spread{TopologyKey: corev1.LabelHostname, MaxSkew: 1}}
	if got := own.RenderFor(source, []*Workload{source, helm}); fmt.Sprint(got.Spread.MatchLabelKeys) != "[pod-template-hash]" {
		t.Fatalf("without a labelSelector each target counts its own pods: %v", got.Spread.MatchLabelKeys)
	}
}
