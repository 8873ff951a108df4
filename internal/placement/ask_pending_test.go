package placement

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// A pod left Pending after a migration succeeded is blamed on the
// constraint only when the constraint is what keeps it out: it fits nowhere
// as it is and somewhere without the migration's entry.
func TestWhyPending(t *testing.T) {
	web := map[string]string{"app": "web"}
	own := &metav1.LabelSelector{MatchLabels: web}
	hostname := Constraint{AntiAffinity: &AntiAffinity{TopologyKey: corev1.LabelHostname}}
	zoneSpread := Constraint{Spread: &Spread{TopologyKey: corev1.LabelTopologyZone, MaxSkew: 1}}
	entry := func(c Constraint, stage pgv1.Stage) *corev1.PodSpec {
		e, err := c.Entry(own, stage)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	// withEntry is a pod of the workload whose template carries entry
	// besides what its owners wrote.
	withEntry := func(e *corev1.PodSpec, opts ...podOpt) *corev1.Pod {
		p := mkPod("ns", "web-new", append([]podOpt{withLabels("app", "web")}, opts...)...)
		applied, err := ConstraintOf(e).Apply(&p.Spec, own, StageOfEntry(e))
		if err != nil {
			t.Fatal(err)
		}
		p.Spec = *applied
		return p
	}
	revisionSpread := entry(Constraint{Spread: &Spread{TopologyKey: corev1.LabelTopologyZone, MaxSkew: 1}}.ForWorkload(pgv1.KindDeployment), pgv1.StageHard)
	twoNodesFull := Objects{
		Nodes: []*corev1.Node{mkNode("a"), mkNode("b")},
		Pods:  []*corev1.Pod{mkPod("ns", "web-1", on("a"), withLabels("app", "web")), mkPod("ns", "web-2", on("b"), withLabels("app", "web"))},
	}
	cases := []struct {
		name         string
		objs         Objects
		pod          *corev1.Pod
		entry        *corev1.PodSpec
		byConstraint bool
		schedulable  bool
	}{
		{
			name: "a scale-up beyond the nodes: the hard anti-affinity keeps the third pod out",
			objs: twoNodesFull, pod: withEntry(entry(hostname, pgv1.StageHard)), entry: entry(hostname, pgv1.StageHard),
			byConstraint: true,
		},
		{
			name: "every placed pod carries the term too, which forbids its node to the pod even without its own copy",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a"), mkNode("b")},
				Pods: []*corev1.Pod{
					withEntry(entry(hostname, pgv1.StageHard), on("a")), withEntry(entry(hostname, pgv1.StageHard), on("b")),
				},
			},
			pod: withEntry(entry(hostname, pgv1.StageHard)), entry: entry(hostname, pgv1.StageHard),
			byConstraint: true,
		},
		{
			name: "placed pods of another workload forbid the node with a term of their own: not the constraint's doing",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a")},
				Pods: []*corev1.Pod{
					withEntry(entry(hostname, pgv1.StageHard), on("a")),
					mkPod("ns", "db", on("a"), withLabels("app", "db"), antiAffinity(term(corev1.LabelHostname, map[string]string{"app": "web"}))),
				},
			},
			pod: withEntry(entry(hostname, pgv1.StageHard)), entry: entry(hostname, pgv1.StageHard),
		},
		{
			name: "no room for its requests on any node: not the constraint's doing",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a", alloc("1", "1Gi", "110")), mkNode("b", alloc("1", "1Gi", "110"))},
				Pods:  []*corev1.Pod{mkPod("ns", "web-1", on("a"), withLabels("app", "web"))},
			},
			pod: withEntry(entry(hostname, pgv1.StageHard), requests("2", "1Gi")), entry: entry(hostname, pgv1.StageHard),
		},
		{
			name: "the constraint and a taint keep it out, but without the constraint it fits: the constraint's doing",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a"), mkNode("b", taint("dedicated", "db", corev1.TaintEffectNoSchedule))},
				Pods:  []*corev1.Pod{mkPod("ns", "web-1", on("a"), withLabels("app", "web"))},
			},
			pod: withEntry(entry(hostname, pgv1.StageHard)), entry: entry(hostname, pgv1.StageHard),
			byConstraint: true,
		},
		{
			name: "a taint on one node, no room on the other: Pending with or without the constraint",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a", alloc("1", "1Gi", "110")), mkNode("b", taint("dedicated", "db", corev1.TaintEffectNoSchedule))},
				Pods:  []*corev1.Pod{mkPod("ns", "web-1", on("a"), withLabels("app", "web"), requests("500m", "100Mi"))},
			},
			pod: withEntry(entry(hostname, pgv1.StageHard), requests("800m", "100Mi")), entry: entry(hostname, pgv1.StageHard),
		},
		{
			name: "the soft stage never keeps a pod out",
			objs: Objects{Nodes: []*corev1.Node{mkNode("a", alloc("1", "1Gi", "110"))}},
			pod:  withEntry(entry(hostname, pgv1.StageSoft), requests("2", "1Gi")), entry: entry(hostname, pgv1.StageSoft),
		},
		{
			name: "a node has room: the scheduler has not got to it yet",
			objs: Objects{Nodes: []*corev1.Node{mkNode("a"), mkNode("b"), mkNode("c")},
				Pods: twoNodesFull.Pods},
			pod: withEntry(entry(hostname, pgv1.StageHard)), entry: entry(hostname, pgv1.StageHard),
			schedulable: true,
		},
		{
			name: "a zone lost under a hard zone spread with minDomains",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a", zone("z1")), mkNode("b", zone("z2"))},
				Pods: []*corev1.Pod{
					mkPod("ns", "web-1", on("a"), withLabels("app", "web")), mkPod("ns", "web-2", on("b"), withLabels("app", "web")),
					mkPod("ns", "web-3", on("b"), withLabels("app", "web")),
				},
			},
			pod:   withEntry(entry(Constraint{Spread: &Spread{TopologyKey: corev1.LabelTopologyZone, MaxSkew: 1, MinDomains: ptrTo(int32(3))}}, pgv1.StageHard)),
			entry: entry(Constraint{Spread: &Spread{TopologyKey: corev1.LabelTopologyZone, MaxSkew: 1, MinDomains: ptrTo(int32(3))}}, pgv1.StageHard),
			// One zone has 1 pod, the other 2, and a third domain is
			// needed: the global minimum is 0, every zone is above skew 1.
			byConstraint: true,
		},
		{
			name: "a zone lost under a spread scoped to the new revision, the pod's selector merged by the API server",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a", zone("z1"), cordoned()), mkNode("b", zone("z2")), mkNode("c", zone("z3"))},
				Pods: []*corev1.Pod{
					mkPod("ns", "web-2", on("b"), withLabels("app", "web", "pod-template-hash", "h1")),
					mkPod("ns", "web-3", on("c"), withLabels("app", "web", "pod-template-hash", "h1")),
				},
			},
			pod:   admitted(withEntry(revisionSpread, withLabels("pod-template-hash", "h1"))),
			entry: revisionSpread,
			// z1's node is cordoned but still counts, with none of the
			// pods: 0, 1, 1, and the pod fits neither z2 nor z3.
			byConstraint: true,
		},
		{
			name: "a spread that still fits somewhere",
			objs: Objects{
				Nodes: []*corev1.Node{mkNode("a", zone("z1")), mkNode("b", zone("z2"))},
				Pods:  []*corev1.Pod{mkPod("ns", "web-1", on("a"), withLabels("app", "web"))},
			},
			pod: withEntry(entry(zoneSpread, pgv1.StageHard)), entry: entry(zoneSpread, pgv1.StageHard),
			schedulable: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSnapshot(tc.objs)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.WhyPending(tc.pod, tc.entry)
			if err != nil {
				t.Fatal(err)
			}
			if got.ByConstraint != tc.byConstraint || got.Verdict.Schedulable != tc.schedulable {
				t.Errorf("byConstraint %v, schedulable %v (%s); want %v, %v", got.ByConstraint, got.Verdict.Schedulable, got.Verdict.Message, tc.byConstraint, tc.schedulable)
			}
		})
	}
}

// WithoutEntry removes exactly the migration's terms and keeps every term
// another writer put beside them.
func TestWithoutEntryKeepsOtherTerms(t *testing.T) {
	own := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	c := Constraint{AntiAffinity: &AntiAffinity{TopologyKey: corev1.LabelHostname}}
	e, err := c.Entry(own, pgv1.StageHard)
	if err != nil {
		t.Fatal(err)
	}
	theirs := term(corev1.LabelTopologyZone, map[string]string{"app": "db"})
	p := mkPod("ns", "p", antiAffinity(theirs), spread(corev1.LabelTopologyZone, 1, map[string]string{"app": "web"}))
	spec, err := c.Apply(&p.Spec, own, pgv1.StageHard)
	if err != nil {
		t.Fatal(err)
	}
	got := WithoutEntry(spec, e)
	if paa := got.Affinity.PodAntiAffinity; len(paa.RequiredDuringSchedulingIgnoredDuringExecution) != 1 || !equalTerm(paa.RequiredDuringSchedulingIgnoredDuringExecution[0], theirs) {
		t.Errorf("required terms %v, want only the one of another writer", paa.RequiredDuringSchedulingIgnoredDuringExecution)
	}
	if len(got.TopologySpreadConstraints) != 1 {
		t.Errorf("spreads %v, want the other writer's one", got.TopologySpreadConstraints)
	}
	if len(spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 2 {
		t.Error("WithoutEntry changed its input")
	}
}

// admitted is pod as the API server stores it: the values of its
// matchLabelKeys merged into each spread's and term's label selector.
func admitted(p *corev1.Pod) *corev1.Pod {
	for i := range p.Spec.TopologySpreadConstraints {
		c := &p.Spec.TopologySpreadConstraints[i]
		for _, k := range c.MatchLabelKeys {
			if v, ok := p.Labels[k]; ok {
				c.LabelSelector.MatchExpressions = append(c.LabelSelector.MatchExpressions,
					metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}})
			}
		}
	}
	return p
}
