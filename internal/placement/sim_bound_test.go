package placement

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// A workload of more replicas than the cluster's nodes admit is answered
// from one sweep of the nodes, whatever its kind: no step is simulated,
// and the answer says why the rollout cannot complete. Twenty million
// replicas simulated pod by pod held gigabytes.
func TestRolloutOfMoreReplicasThanTheNodesAdmitIsNotSimulated(t *testing.T) {
	objs := Objects{Nodes: []*corev1.Node{mkNode("a"), mkNode("b", alloc("4", "8Gi", "30"))}}
	dep := deployment(objs, "bulk", 20_000_000, appsv1.DeploymentStrategy{})
	sts := &Workload{Kind: pgv1.KindStatefulSet, Namespace: "ns", Name: "bulk", Replicas: 20_000_000,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "bulk"}}, Template: dep.Template,
		PodManagementPolicy: appsv1.ParallelPodManagement}
	snap := mustSnapshot(t, objs)
	if got := snap.PodSlots(); got != 140 {
		t.Fatalf("PodSlots %d, want 110+30", got)
	}
	for _, w := range []*Workload{dep, sts} {
		r, err := snap.SimulateRollout(w)
		if err != nil {
			t.Fatal(err)
		}
		if r.Completes || len(r.Steps) != 0 || r.Blocked == nil {
			t.Fatalf("%s: completes %v with %d steps, blocked %v: want an answer without simulation", w.Kind, r.Completes, len(r.Steps), r.Blocked)
		}
		if !strings.Contains(r.Blocked.Message, "20000000 replicas exceed the 140 pods") {
			t.Errorf("%s: %q does not say why", w.Kind, r.Blocked.Message)
		}
		a, err := snap.Analyze(Question{Workloads: []*Workload{w}, Constraint: Constraint{Spread: &Spread{TopologyKey: corev1.LabelHostname, MaxSkew: 1000}},
			Stage: pgv1.StageHard, Capacity: CapacitySpec{}})
		if err != nil {
			t.Fatal(err)
		}
		if h := a.FirstBlocking(); h == nil || h.Type != HazardUnschedulable || !strings.Contains(h.Message, "exceed the 140 pods") {
			t.Errorf("%s: want a blocking Unschedulable naming the bound, got %+v", w.Kind, a.Hazards)
		}
	}

	// At the bound the rollout is simulated as before.
	dep.Replicas = 140
	r, err := snap.SimulateRollout(dep)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Completes || len(r.Steps) != 140 {
		t.Fatalf("140 replicas on 140 slots: completes %v in %d steps", r.Completes, len(r.Steps))
	}
}

// A question stopped by its context gives up at its next pod, and its
// answer is not used: Within says it was stopped, whatever the question
// returned.
func TestAQuestionStopsWhenItsContextEnds(t *testing.T) {
	var nodes []*corev1.Node
	for _, n := range []string{"a", "b", "c", "d"} {
		nodes = append(nodes, mkNode(n))
	}
	objs := Objects{Nodes: nodes}
	w := deployment(objs, "web", 400, appsv1.DeploymentStrategy{})
	snap := mustSnapshot(t, objs)

	ctx, cancel := context.WithCancel(context.Background())
	var r Rollout
	err := snap.Within(ctx, func(s *Snapshot) error {
		cancel()
		var err error
		r, err = s.SimulateRollout(w)
		return err
	})
	if !errors.Is(err, ErrInterrupted) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want ErrInterrupted wrapping the context's cause", err)
	}
	if placed := len(r.Steps) - len(r.LeftPending()); placed > 1 {
		t.Fatalf("%d pods placed after the context ended, want at most the one under way", placed)
	}

	// The next question, within a live context, is answered whole.
	err = snap.Within(context.Background(), func(s *Snapshot) error {
		var err error
		r, err = s.SimulateRollout(w)
		return err
	})
	if err != nil || !r.Completes {
		t.Fatalf("after the stop, a question is answered: completes %v, err %v", r.Completes, err)
	}
	if snap.interrupted() {
		t.Fatal("the stop outlived its question")
	}

	// A context that has ended already asks nothing.
	asked := false
	if err := snap.Within(ctx, func(*Snapshot) error { asked = true; return nil }); !errors.Is(err, ErrInterrupted) || asked {
		t.Fatalf("an ended context: err %v, asked %v", err, asked)
	}
}

func mustSnapshot(t *testing.T, objs Objects) *Snapshot {
	t.Helper()
	snap, err := NewSnapshot(objs)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// How many replicas cannot be placed is counted from scratch, the
// workload's own pods aside: three replicas kept apart on a pool of three
// nodes all fit, on a pool of two one does not, and of twenty million
// replicas no more than the nodes admit are placed.
func TestUnplaceableCountsFromScratch(t *testing.T) {
	objs := Objects{Nodes: []*corev1.Node{mkNode("a1", label("pool", "a")), mkNode("a2", label("pool", "a")), mkNode("a3", label("pool", "a")),
		mkNode("b1", label("pool", "b")), mkNode("b2", label("pool", "b"))}}
	apart := antiAffinity(term(corev1.LabelHostname, map[string]string{"app": "rates"}))
	for i, n := range []string{"a1", "a2", "a3"} {
		objs.Pods = append(objs.Pods, mkPod("ns", "rates-"+string(rune('x'+i)), on(n), withLabels("app", "rates"), nodeSelector("pool", "a"), apart))
	}
	snap := mustSnapshot(t, objs)
	for _, c := range []struct {
		pool     string
		replicas int32
		want     int
	}{{"a", 3, 0}, {"b", 3, 1}, {"a", 50, 47}, {"b", 50, 48}} {
		w := deployment(objs, "rates", c.replicas, appsv1.DeploymentStrategy{}, nodeSelector("pool", c.pool), apart)
		got, err := snap.Unplaceable(w)
		if err != nil || got != c.want {
			t.Errorf("%d replicas on pool %s: %d unplaceable, %v; want %d", c.replicas, c.pool, got, err, c.want)
		}
	}
	w := deployment(objs, "bulk", 20_000_000, appsv1.DeploymentStrategy{})
	if got, err := snap.Unplaceable(w); err != nil || got != 20_000_000-(5*110-3) {
		t.Errorf("twenty million: %d unplaceable, %v", got, err)
	}
}

// A required anti-affinity term aimed at another namespace's pods is a
// wall for them too: a tenant's workload that takes the last node the
// payments team's database could replace a pod on strands it, and says
// so, blocking. The same term kept to its own namespace, or a term that
// leaves the database room, says nothing.
func TestATermAimedAtAnotherNamespacesPodsStrandsThem(t *testing.T) {
	nodes := []*corev1.Node{mkNode("n1"), mkNode("n2"), mkNode("n3"), mkNode("n4")}
	dbApart := antiAffinity(term(corev1.LabelHostname, map[string]string{"app": "db"}))
	objs := Objects{Nodes: nodes, Namespaces: []*corev1.Namespace{mkNamespace("payments", "team", "payments"), mkNamespace("ns", "team", "shop")}}
	for i, n := range []string{"n1", "n2", "n3"} {
		db := mkPod("payments", fmt.Sprintf("db-%d", i), on(n), withLabels("app", "db"), dbApart)
		db.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "db-7f9", UID: "rs-db", Controller: ptr.To(true)}}
		objs.Pods = append(objs.Pods, db)
	}
	snap := mustSnapshot(t, objs)
	spoiler := deployment(objs, "spoiler", 1, appsv1.DeploymentStrategy{})
	ask := func(a AntiAffinity) Answer {
		t.Helper()
		ans, err := snap.Analyze(Question{Workloads: []*Workload{spoiler}, Constraint: Constraint{AntiAffinity: &a}, Stage: pgv1.StageHard})
		if err != nil {
			t.Fatal(err)
		}
		return ans
	}
	db := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}
	h := ask(AntiAffinity{TopologyKey: corev1.LabelHostname, Selector: db, NamespaceSelector: &metav1.LabelSelector{}}).FirstBlocking()
	if h == nil || h.Type != HazardStrandsOthers || !strings.Contains(h.Message, "payments/db-7f9") {
		t.Fatalf("a term on every namespace's db pods, taking the last free node: want StrandsOthers naming payments/db-7f9, got %+v", h)
	}
	if h := ask(AntiAffinity{TopologyKey: corev1.LabelHostname, Selector: db, Namespaces: []string{"payments"}}).FirstBlocking(); h == nil || h.Type != HazardStrandsOthers {
		t.Fatalf("a term naming the namespace: want StrandsOthers, got %+v", h)
	}
	if h := ask(AntiAffinity{TopologyKey: corev1.LabelHostname, Selector: db}).FirstBlocking(); h != nil {
		t.Fatalf("a term on the workload's own namespace: %+v", h)
	}
	snap.UpsertNode(mkNode("n5"))
	if h := ask(AntiAffinity{TopologyKey: corev1.LabelHostname, Selector: db, NamespaceSelector: &metav1.LabelSelector{}}).FirstBlocking(); h != nil {
		t.Fatalf("with a node to spare for the database: %+v", h)
	}
}
