package schedulerfidelity

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	resourceslicetracker "k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodevolumelimits"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
)

// verdict is where a pod may go: the nodes that pass every filter, by
// name, and the scheduler's FailedScheduling message (without the
// preemption part) when none does.
type verdict struct {
	nodes   []string
	message string
	// best are the nodes of the highest total score, when scored.
	best []string
}

// gatedMessage is the PodScheduled message of a pod the scheduler does
// not try: the SchedulingGates plugin holds it before the queue.
const gatedMessage = "Scheduling is blocked due to non-empty scheduling gates"

// scheduler runs kube-scheduler's default profile in this process: the
// in-tree plugins, configured as the v1 KubeSchedulerConfiguration's
// defaults configure them.
type scheduler struct {
	profile  *config.KubeSchedulerProfile
	recorder *metrics.MetricAsyncRecorder
}

func newScheduler(stop <-chan struct{}) (*scheduler, error) {
	cfg, err := latest.Default()
	if err != nil {
		return nil, fmt.Errorf("the default scheduler configuration: %w", err)
	}
	return newSchedulerWith(stop, &cfg.Profiles[0]), nil
}

// newSchedulerWith runs profile instead of the default one.
func newSchedulerWith(stop <-chan struct{}, profile *config.KubeSchedulerProfile) *scheduler {
	// The framework counts plugin executions in the scheduler's metrics,
	// which exist once registered.
	metrics.Register()
	return &scheduler{profile: profile, recorder: metrics.NewMetricsAsyncRecorder(1000, time.Second, stop)}
}

// decide runs PreFilter, then Filter on every node, for the scenario's
// pending pod, as the scheduling cycle's findNodesThatFitPod does, and
// composes the message as its FitError does.
func (s *scheduler) decide(sc *scenario) (verdict, error) {
	return s.run(sc, false)
}

// land is decide, and then, as the scheduling cycle's prioritizeNodes
// does, PreScore and Score (with NormalizeScore and the weights) on the
// nodes that pass: best are the nodes of the highest total.
func (s *scheduler) land(sc *scenario) (verdict, error) {
	return s.run(sc, true)
}

func (s *scheduler) run(sc *scenario, score bool) (verdict, error) {
	if len(sc.pending.Spec.SchedulingGates) > 0 {
		return verdict{message: gatedMessage}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(sc.apiObjects()...)
	factory := informers.NewSharedInformerFactory(client, 0)
	snapshot := internalcache.NewSnapshot(sc.boundPods(), sc.nodes)
	dra, err := draManager(ctx, client, factory)
	if err != nil {
		return verdict{}, err
	}
	f, err := frameworkruntime.NewFramework(ctx, plugins.NewInTreeRegistry(), s.profile,
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithSnapshotSharedLister(snapshot),
		frameworkruntime.WithSharedCSIManager(nodevolumelimits.NewCSIManager(factory.Storage().V1().CSINodes().Lister())),
		frameworkruntime.WithMetricsRecorder(s.recorder),
		frameworkruntime.WithSharedDRAManager(dra),
	)
	if err != nil {
		return verdict{}, fmt.Errorf("the scheduler framework: %w", err)
	}
	factory.Start(ctx.Done())
	for typ, synced := range factory.WaitForCacheSync(ctx.Done()) {
		if !synced {
			return verdict{}, fmt.Errorf("the %v informer did not sync", typ)
		}
	}

	state := framework.NewCycleState()
	all, err := snapshot.NodeInfos().List()
	if err != nil {
		return verdict{}, err
	}
	pre, status, rejectedBy := f.RunPreFilterPlugins(ctx, state, sc.pending)
	if !status.IsSuccess() {
		if !status.IsRejected() {
			return verdict{}, status.AsError()
		}
		return verdict{message: fmt.Sprintf("0/%d nodes are available: %s.", len(all), status.Message())}, nil
	}
	reasons := map[string]int{}
	candidates := all
	if !pre.AllNodes() {
		candidates = nil
		for _, n := range all {
			if pre.NodeNames.Has(n.Node().Name) {
				candidates = append(candidates, n)
			}
		}
		if absent := len(all) - len(candidates); absent > 0 {
			reasons[fmt.Sprintf("node(s) didn't satisfy plugin(s) %v", sets.List(rejectedBy))] += absent
		}
	}
	var v verdict
	var feasible []fwk.NodeInfo
	for _, n := range candidates {
		st := f.RunFilterPlugins(ctx, state, sc.pending, n)
		if st.IsSuccess() {
			v.nodes = append(v.nodes, n.Node().Name)
			feasible = append(feasible, n)
			continue
		}
		if !st.IsRejected() {
			return verdict{}, st.AsError()
		}
		for _, r := range st.Reasons() {
			reasons[r]++
		}
	}
	slices.Sort(v.nodes)
	if len(v.nodes) == 0 {
		v.message = fitError(len(all), reasons)
	}
	if score && len(feasible) > 0 {
		if v.best, err = bestScored(ctx, f, state, sc, feasible); err != nil {
			return verdict{}, err
		}
	}
	return v, nil
}

// bestScored runs the score plugins as prioritizeNodes does and returns
// the nodes of the highest total, sorted; a single feasible node is not
// scored.
func bestScored(ctx context.Context, f framework.Framework, state fwk.CycleState, sc *scenario, feasible []fwk.NodeInfo) ([]string, error) {
	if len(feasible) == 1 {
		return []string{feasible[0].Node().Name}, nil
	}
	if st := f.RunPreScorePlugins(ctx, state, sc.pending, feasible); !st.IsSuccess() {
		return nil, st.AsError()
	}
	scores, st := f.RunScorePlugins(ctx, state, sc.pending, feasible)
	if !st.IsSuccess() {
		return nil, st.AsError()
	}
	var top int64 = -1
	var best []string
	for _, ns := range scores {
		switch {
		case ns.TotalScore > top:
			top, best = ns.TotalScore, []string{ns.Name}
		case ns.TotalScore == top:
			best = append(best, ns.Name)
		}
	}
	slices.Sort(best)
	return best, nil
}

// fitError is FitError's message: the reasons' counts, sorted as strings.
func fitError(nodes int, reasons map[string]int) string {
	msg := fmt.Sprintf("0/%d nodes are available:", nodes)
	var counted []string
	for r, n := range reasons {
		counted = append(counted, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(counted)
	if len(counted) > 0 {
		msg += " " + strings.Join(counted, ", ") + "."
	}
	return msg
}

// draManager is the DynamicResources plugin's view of claims and slices,
// built as kube-scheduler builds it: no scenario claims devices, but the
// plugin reads it for every pod.
func draManager(ctx context.Context, client *fake.Clientset, factory informers.SharedInformerFactory) (*dynamicresources.DefaultDRAManager, error) {
	claims := assumecache.NewAssumeCache(klog.FromContext(ctx), factory.Resource().V1().ResourceClaims().Informer(), "ResourceClaim", "", nil)
	slices, err := resourceslicetracker.StartTracker(ctx, resourceslicetracker.Options{
		SliceInformer: factory.Resource().V1().ResourceSlices(),
		KubeClient:    client,
	})
	if err != nil {
		return nil, fmt.Errorf("the resource slice tracker: %w", err)
	}
	return dynamicresources.NewDRAManager(ctx, claims, slices, factory), nil
}
