package placement

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// One snapshot predicts each pod with the profile its schedulerName
// names, whichever pod was asked about before: a profile that turns the
// taint filter off and packs lets its pods onto the tainted node and
// stacks them, while the default profile's pods keep off it and spread.
func TestEachPodIsPredictedWithTheProfileItNames(t *testing.T) {
	objs := Objects{
		Nodes: []*corev1.Node{
			mkNode("a", taint("dedicated", "batch", corev1.TaintEffectNoSchedule)),
			mkNode("b"), mkNode("c"),
		},
		Pods: []*corev1.Pod{mkPod("ns", "busy", on("b"), requests("1", "1Gi"))},
	}
	lax := DefaultProfile()
	lax.Name = "lax"
	lax.DisabledFilters = map[string]bool{FilterTaintToleration: true}
	lax.Fit = FitScoring{Type: MostAllocated, Resources: lax.Fit.Resources}
	delete(lax.Weights, PluginBalancedAllocation)
	delete(lax.Weights, PluginPodTopologySpread)
	ps, err := NewProfiles("default-scheduler", DefaultProfile(), lax)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSnapshot(objs)
	if err != nil {
		t.Fatal(err)
	}
	s.SetProfiles(ps)
	pod := func(scheduler string) *corev1.Pod {
		p := mkPod("ns", "new", requests("500m", "512Mi"))
		p.Spec.SchedulerName = scheduler
		return p
	}
	type want struct {
		feasible []string
		best     string
		profile  string
	}
	cases := map[string]want{
		"":                  {[]string{"b", "c"}, "c", "default-scheduler"},
		"default-scheduler": {[]string{"b", "c"}, "c", "default-scheduler"},
		"lax":               {[]string{"a", "b", "c"}, "b", "lax"},
	}
	// Both orders: the node filters kept between questions are each
	// profile's own.
	for _, order := range [][]string{{"", "lax", "default-scheduler"}, {"lax", "default-scheduler", ""}} {
		for _, name := range order {
			w := cases[name]
			v, err := s.Schedule(pod(name))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(v.Nodes, w.feasible) {
				t.Errorf("order %q: pod naming %q passes the filters on %v, want %v", order, name, v.Nodes, w.feasible)
			}
			l, err := s.Land(pod(name))
			if err != nil {
				t.Fatal(err)
			}
			if l.Profile != w.profile || !slices.Equal(l.Best, []string{w.best}) {
				t.Errorf("order %q: pod naming %q lands on %v with %s, want %s with %s", order, name, l.Best, l.Profile, w.best, w.profile)
			}
		}
	}
	w := &Workload{Kind: "Deployment", Name: "x", Template: corev1.PodTemplateSpec{Spec: pod("batch").Spec}}
	if name, described := s.SchedulerOf(w); described || name != "batch" {
		t.Errorf("pods naming an undescribed scheduler: %q, described %v", name, described)
	}
	if h := s.unknownScheduler(w); h == nil || !h.Blocking || h.Type != HazardUnknownScheduler {
		t.Errorf("pods naming an undescribed scheduler are not said to be unpredicted: %+v", h)
	}
}
