package placement

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// The disruptions a hard stage would meet are simulated before it is
// applied, on the placement its rollout would leave, not on today's.
func TestWithRolledOut(t *testing.T) {
	web := map[string]string{"app": "web"}
	hard := antiAffinity(term(corev1.LabelHostname, web))
	cluster := func(nodes int, placed ...string) Objects {
		var objs Objects
		for i := range nodes {
			objs.Nodes = append(objs.Nodes, mkNode(fmt.Sprintf("n%d", i)))
		}
		for i, n := range placed {
			objs.Pods = append(objs.Pods, mkPod("ns", fmt.Sprintf("web-%d", i), on(n), withLabels("app", "web")))
		}
		return objs
	}
	cases := []struct {
		name string
		objs Objects
		// drained is the node drained on the rolled-out placement.
		drained string
		// nodes are where the rolled-out pods run, sorted.
		nodes    []string
		unplaced int
	}{
		{name: "seed 001: replicas == nodes, the rollout completes but a drain strands the evicted pod",
			objs: cluster(3, "n0", "n1", "n2"), drained: "n0", nodes: []string{"n0", "n1", "n2"}, unplaced: 1},
		{name: "N+1: the evicted pod moves to the spare node",
			objs: cluster(4, "n0", "n1", "n2"), drained: "n1", nodes: []string{"n0", "n1", "n3"}},
		{name: "pods stacked today are apart once rolled out: a drain evicts one pod, which finds the spare node",
			objs: cluster(4, "n0", "n0", "n1"), drained: "n2", nodes: []string{"n0", "n2", "n3"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSnapshot(tc.objs)
			if err != nil {
				t.Fatal(err)
			}
			w := deployment(tc.objs, "web", int32(len(tc.objs.Pods)), unavailable(1), hard)
			r, err := s.SimulateRollout(w)
			if err != nil || !r.Completes {
				t.Fatalf("the rollout should complete: %+v, %v", r, err)
			}
			before := s.PodCount()
			var drain Drain
			err = s.WithRolledOut(w, r, func(rolled *Workload, pods []*corev1.Pod) error {
				if len(pods) != len(tc.objs.Pods) || len(rolled.Pods) != len(pods) {
					t.Errorf("rolled out %d pods (%d UIDs), want %d", len(pods), len(rolled.Pods), len(tc.objs.Pods))
				}
				var nodes []string
				for _, p := range pods {
					if p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != newRevisionHash || p.Spec.Affinity == nil {
						t.Errorf("pod %s is not of the new template: %v", p.Name, p.Labels)
					}
					nodes = append(nodes, p.Spec.NodeName)
				}
				slices.Sort(nodes)
				if !slices.Equal(nodes, tc.nodes) {
					t.Errorf("rolled-out pods on %v, want %v", nodes, tc.nodes)
				}
				for _, p := range tc.objs.Pods {
					if _, ok := s.Pod(p.UID); ok {
						t.Errorf("old pod %s still in the rolled-out snapshot", p.Name)
					}
				}
				var err error
				drain, err = s.SimulateDrain(rolled, tc.drained)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if drain.Evicted != 1 || len(drain.Unplaced) != tc.unplaced {
				t.Errorf("drain of %s on the rolled-out placement: evicted %d, unplaced %v (%s); want 1, %d",
					tc.drained, drain.Evicted, drain.Unplaced, drain.Message, tc.unplaced)
			}
			assertRestored(t, s, before, tc.objs.Pods)
		})
	}
}

func TestWithRolledOutStatefulSet(t *testing.T) {
	db := map[string]string{"app": "db"}
	objs := Objects{Nodes: []*corev1.Node{mkNode("n0", zone("a")), mkNode("n1", zone("b")), mkNode("n2", zone("a"))}}
	for i, n := range []string{"n0", "n2"} {
		objs.Pods = append(objs.Pods, mkPod("ns", fmt.Sprintf("db-%d", i), on(n), withLabels("app", "db")))
	}
	p := mkPod("ns", "template", withLabels("app", "db"), spread(corev1.LabelTopologyZone, 1, db))
	w := &Workload{Kind: pgv1.KindStatefulSet, Namespace: "ns", Name: "db", Replicas: 2,
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: p.Labels}, Spec: p.Spec}}
	for _, pod := range objs.Pods {
		w.Pods = append(w.Pods, pod.UID)
	}
	s, err := NewSnapshot(objs)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.SimulateRollout(w)
	if err != nil || !r.Completes {
		t.Fatalf("the rollout should complete: %+v, %v", r, err)
	}
	before := s.PodCount()
	err = s.WithRolledOut(w, r, func(rolled *Workload, pods []*corev1.Pod) error {
		zones := map[string]bool{}
		for _, p := range pods {
			if !strings.HasPrefix(p.Name, "db-") || p.Labels[appsv1.StatefulSetPodNameLabel] != p.Name {
				t.Errorf("pod %s is not a StatefulSet pod of the new revision: %v", p.Name, p.Labels)
			}
			zones[map[string]string{"n0": "a", "n1": "b", "n2": "a"}[p.Spec.NodeName]] = true
		}
		if len(pods) != 2 || !zones["a"] || !zones["b"] {
			t.Errorf("rolled-out pods %v should be one per zone", pods)
		}
		l, err := s.SimulateDomainLoss(rolled, corev1.LabelTopologyZone, "b")
		if err == nil && l.Evicted != 1 {
			t.Errorf("the loss of zone b takes %d pods, want the one rolled there", l.Evicted)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	assertRestored(t, s, before, objs.Pods)
}

func TestWithRolledOutRefusesAStuckRollout(t *testing.T) {
	web := map[string]string{"app": "web"}
	objs := Objects{Nodes: []*corev1.Node{mkNode("n0")}, Pods: []*corev1.Pod{
		mkPod("ns", "web-0", on("n0"), withLabels("app", "web")), mkPod("ns", "web-1", on("n0"), withLabels("app", "web"))}}
	s, _ := NewSnapshot(objs)
	w := deployment(objs, "web", 2, unavailable(1), antiAffinity(term(corev1.LabelHostname, web)))
	r, err := s.SimulateRollout(w)
	if err != nil || r.Completes {
		t.Fatalf("two pods apart on one node cannot roll out: %+v, %v", r, err)
	}
	called := false
	err = s.WithRolledOut(w, r, func(*Workload, []*corev1.Pod) error { called = true; return nil })
	if err == nil || called {
		t.Fatalf("want an error and f not called, got %v, called %v", err, called)
	}
	assertRestored(t, s, 2, objs.Pods)
}

// assertRestored checks the snapshot holds the pods it held before, on
// their nodes, and none of the simulated ones.
func assertRestored(t *testing.T, s *Snapshot, before int, pods []*corev1.Pod) {
	t.Helper()
	if s.PodCount() != before {
		t.Errorf("the snapshot holds %d pods after the simulation, %d before", s.PodCount(), before)
	}
	for _, p := range pods {
		got, ok := s.Pod(p.UID)
		if !ok || got.Spec.NodeName != p.Spec.NodeName || s.pods[s.podByUID[p.UID]].node == noNode {
			t.Errorf("pod %s not restored on %s", p.Name, p.Spec.NodeName)
		}
	}
	for uid := range s.podByUID {
		if strings.HasPrefix(string(uid), simulatedUIDPrefix) {
			t.Errorf("simulated pod %s left in the snapshot", uid)
		}
	}
}
