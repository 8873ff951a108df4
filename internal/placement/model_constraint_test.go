package placement

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

func TestApplyAntiAffinityKeepsEverythingElse(t *testing.T) {
	own := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	existingNodeAffinity := &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/os", Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}}}}},
	}}
	otherTerm := term(corev1.LabelTopologyZone, map[string]string{"app": "db"})
	spec := &corev1.PodSpec{Affinity: &corev1.Affinity{
		NodeAffinity:    existingNodeAffinity.DeepCopy(),
		PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{otherTerm}},
	}}
	c := Constraint{AntiAffinity: &AntiAffinity{TopologyKey: corev1.LabelHostname}}

	soft, err := c.Apply(spec, own, pgv1.StageSoft)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.StageOf(soft, own); got != pgv1.StageSoft {
		t.Fatalf("stage after soft = %s", got)
	}
	if n := len(soft.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution); n != 1 {
		t.Fatalf("want one preferred term, got %d", n)
	}
	hard, _ := c.Apply(soft, own, pgv1.StageHard)
	if got := c.StageOf(hard, own); got != pgv1.StageHard {
		t.Fatalf("stage after hard = %s", got)
	}
	paa := hard.Affinity.PodAntiAffinity
	if len(paa.PreferredDuringSchedulingIgnoredDuringExecution) != 0 {
		t.Fatalf("soft to hard must replace our soft term, got %+v", paa.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	if len(paa.RequiredDuringSchedulingIgnoredDuringExecution) != 2 || !equalTerm(paa.RequiredDuringSchedulingIgnoredDuringExecution[0], otherTerm) {
		t.Fatalf("the existing required term must stay first and unchanged: %+v", paa.RequiredDuringSchedulingIgnoredDuringExecution)
	}
	if !reflect.DeepEqual(hard.Affinity.NodeAffinity, existingNodeAffinity) {
		t.Fatalf("node affinity changed: %+v", hard.Affinity.NodeAffinity)
	}
	again, _ := c.Apply(hard, own, pgv1.StageHard)
	if !reflect.DeepEqual(again, hard) {
		t.Fatal("applying the same stage twice must change nothing")
	}
	none, _ := c.Apply(hard, own, pgv1.StageNone)
	if !reflect.DeepEqual(none, spec) {
		t.Fatalf("removing our constraint must restore the original spec:\n got %+v\nwant %+v", none.Affinity, spec.Affinity)
	}
	if !reflect.DeepEqual(spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, []corev1.PodAffinityTerm{otherTerm}) {
		t.Fatal("Apply must not mutate its input")
	}
}

func TestApplySpreadStages(t *testing.T) {
	own := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	three := int32(3)
	c := Constraint{Spread: &Spread{TopologyKey: corev1.LabelTopologyZone, MaxSkew: 1, MinDomains: &three, MatchLabelKeys: []string{"pod-template-hash"}}}
	existing := corev1.TopologySpreadConstraint{MaxSkew: 2, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: own}
	spec := &corev1.PodSpec{TopologySpreadConstraints: []corev1.TopologySpreadConstraint{existing}}

	soft, _ := c.Apply(spec, own, pgv1.StageSoft)
	if len(soft.TopologySpreadConstraints) != 2 {
		t.Fatalf("want the existing and our soft constraint, got %+v", soft.TopologySpreadConstraints)
	}
	ours := soft.TopologySpreadConstraints[1]
	if ours.WhenUnsatisfiable != corev1.ScheduleAnyway || ours.MinDomains != nil {
		t.Fatalf("the soft stage is ScheduleAnyway without minDomains (the API forbids it), got %+v", ours)
	}
	hard, _ := c.Apply(soft, own, pgv1.StageHard)
	if len(hard.TopologySpreadConstraints) != 2 {
		t.Fatalf("soft to hard must replace ours, got %+v", hard.TopologySpreadConstraints)
	}
	ours = hard.TopologySpreadConstraints[1]
	if ours.WhenUnsatisfiable != corev1.DoNotSchedule || ours.MinDomains == nil || *ours.MinDomains != 3 {
		t.Fatalf("hard stage: %+v", ours)
	}
	if !reflect.DeepEqual(hard.TopologySpreadConstraints[0], existing) {
		t.Fatal("the existing constraint changed")
	}
	if got := c.StageOf(hard, own); got != pgv1.StageHard {
		t.Fatalf("StageOf = %s", got)
	}
	if got := c.StageOf(spec, own); got != pgv1.StageNone {
		t.Fatalf("StageOf the original = %s", got)
	}
}

func TestDescribeSaysWhatChanges(t *testing.T) {
	aa := Constraint{AntiAffinity: &AntiAffinity{TopologyKey: "kubernetes.io/hostname", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "search"}}}}
	sp := Constraint{Spread: &Spread{TopologyKey: "topology.kubernetes.io/zone", MaxSkew: 1}}
	cases := []struct {
		c        Constraint
		from, to pgv1.Stage
		want     string
	}{
		{aa, pgv1.StageNone, pgv1.StageSoft, "adds a preferred podAntiAffinity term (weight 100) keeping pods apart from pods matching app=search per kubernetes.io/hostname"},
		{aa, pgv1.StageSoft, pgv1.StageHard, "replaces a preferred podAntiAffinity term (weight 100) keeping pods apart from pods matching app=search per kubernetes.io/hostname with a required podAntiAffinity term keeping pods apart from pods matching app=search per kubernetes.io/hostname"},
		{aa, pgv1.StageHard, pgv1.StageNone, "removes a required podAntiAffinity term"},
		{sp, pgv1.StageNone, pgv1.StageSoft, "adds a ScheduleAnyway topologySpreadConstraint (maxSkew 1) spreading the workload's own pods over topology.kubernetes.io/zone"},
		{sp, pgv1.StageHard, pgv1.StageHard, "no change: the template already carries a DoNotSchedule topologySpreadConstraint"},
	}
	for _, tc := range cases {
		if got := tc.c.Describe(tc.from, tc.to); !strings.HasPrefix(got, tc.want) {
			t.Errorf("Describe(%s, %s) = %q, want prefix %q", tc.from, tc.to, got, tc.want)
		}
	}
}

// A stage replaces the spread's other form where it stands: the list's
// order, which a GitOps tool compares, moves no more than the stage does.
func TestAStageReplacesASpreadInPlace(t *testing.T) {
	own := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	c := Constraint{Spread: &Spread{TopologyKey: corev1.LabelTopologyZone, MaxSkew: 1}}
	other := corev1.TopologySpreadConstraint{TopologyKey: corev1.LabelHostname, MaxSkew: 2, WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: own}
	spec := &corev1.PodSpec{TopologySpreadConstraints: []corev1.TopologySpreadConstraint{c.Spread.SpreadConstraint(own, pgv1.StageSoft), other}}
	hard, err := c.Apply(spec, own, pgv1.StageHard)
	if err != nil {
		t.Fatal(err)
	}
	want := []corev1.TopologySpreadConstraint{c.Spread.SpreadConstraint(own, pgv1.StageHard), other}
	if !reflect.DeepEqual(hard.TopologySpreadConstraints, want) {
		t.Fatalf("hardened in place: %+v, want %+v", hard.TopologySpreadConstraints, want)
	}
	if none, _ := c.Apply(hard, own, pgv1.StageNone); !reflect.DeepEqual(none.TopologySpreadConstraints, want[1:]) {
		t.Fatalf("removed: %+v", none.TopologySpreadConstraints)
	}
	if again, _ := c.Apply(&corev1.PodSpec{TopologySpreadConstraints: want[1:]}, own, pgv1.StageSoft); c.StageOf(again, own) != pgv1.StageSoft || len(again.TopologySpreadConstraints) != 2 || again.TopologySpreadConstraints[1].TopologyKey != corev1.LabelTopologyZone {
		t.Fatalf("a stage the spec lacks goes last: %+v", again.TopologySpreadConstraints)
	}
}
