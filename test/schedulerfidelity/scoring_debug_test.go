//go:build explain

package schedulerfidelity

import (
	"context"
	"os"
	"strconv"
	"testing"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodevolumelimits"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/placement-guard/placement-guard/internal/schedulerprofile"
)

// TestScoringExplain prints, for the scenario of seed
// PLACEMENT_GUARD_SCORING_SEED, each plugin's weighted score per node on
// both sides: the tool for reading a disagreement, built only with
// -tags explain (go test -tags explain -run TestScoringExplain -v).
func TestScoringExplain(t *testing.T) {
	v, ok := os.LookupEnv("PLACEMENT_GUARD_SCORING_SEED")
	if !ok {
		t.Skip("set PLACEMENT_GUARD_SCORING_SEED to explain one scenario")
	}
	seed, _ := strconv.Atoi(v)
	sp := scoringProfiles()[0]
	if os.Getenv("PLACEMENT_GUARD_SCORING_PROFILE") == "filters-off" {
		p, err := schedulerprofile.Parse([]byte(filtersOff), "")
		if err != nil {
			t.Fatal(err)
		}
		sp = scoringProfile{name: "filters-off", config: filtersOff, engine: p}
	}
	sc := generateScoring(uint64(seed))
	if os.Getenv("PLACEMENT_GUARD_SCORING_GENERATOR") == "filters" {
		sc = generate(uint64(seed))
	}
	t.Logf("pending: %+v", sc.pending)
	for _, p := range sc.existing {
		t.Logf("existing %s/%s on %s labels %v terminating %v", p.Namespace, p.Name, p.Spec.NodeName, p.Labels, p.DeletionTimestamp != nil)
	}
	for _, n := range sc.nodes {
		t.Logf("node %s labels %v taints %v alloc %v", n.Name, n.Labels, n.Spec.Taints, n.Status.Allocatable)
	}
	s, err := newProfileScheduler(t.Context().Done(), sp)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(sc.apiObjects()...)
	factory := informers.NewSharedInformerFactory(client, 0)
	snapshot := internalcache.NewSnapshot(sc.boundPods(), sc.nodes)
	dra, err := draManager(ctx, client, factory)
	if err != nil {
		t.Fatal(err)
	}
	f, err := frameworkruntime.NewFramework(ctx, plugins.NewInTreeRegistry(), s.profile,
		frameworkruntime.WithClientSet(client), frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithSnapshotSharedLister(snapshot),
		frameworkruntime.WithSharedCSIManager(nodevolumelimits.NewCSIManager(factory.Storage().V1().CSINodes().Lister())),
		frameworkruntime.WithMetricsRecorder(s.recorder), frameworkruntime.WithSharedDRAManager(dra))
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	state := framework.NewCycleState()
	all, _ := snapshot.NodeInfos().List()
	f.RunPreFilterPlugins(ctx, state, sc.pending)
	var feasible []fwk.NodeInfo
	for _, n := range all {
		if f.RunFilterPlugins(ctx, state, sc.pending, n).IsSuccess() {
			feasible = append(feasible, n)
		}
	}
	f.RunPreScorePlugins(ctx, state, sc.pending, feasible)
	scores, st := f.RunScorePlugins(ctx, state, sc.pending, feasible)
	if !st.IsSuccess() {
		t.Fatal(st.AsError())
	}
	for _, ns := range scores {
		t.Logf("kube-scheduler %s total %d: %v", ns.Name, ns.TotalScore, ns.Scores)
	}
	es, err := sc.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	es.SetProfiles(sp.engine)
	l, err := es.Land(sc.pending)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range l.Ranking {
		t.Logf("engine %s total %d: %v", r.Node, r.Total, r.Plugins)
	}
}
