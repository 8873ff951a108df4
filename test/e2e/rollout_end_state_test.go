package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/targets"
	"github.com/placement-guard/placement-guard/test/utils"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// endStateScenario is one generated rollout: a Deployment started unevenly
// over zones, then given a hard zone spread.
type endStateScenario struct {
	seed           uint64
	zones          []string
	start          map[string]int
	replicas       int
	surge, unavail intstr.IntOrString
	maxSkew        int32
	allRevisions   bool
}

func (s endStateScenario) String() string {
	scope := "new revision"
	if s.allRevisions {
		scope = "all revisions"
	}
	return fmt.Sprintf("seed %d: %d replicas from %s, maxSurge %s maxUnavailable %s, maxSkew %d, counting %s",
		s.seed, s.replicas, placement.DescribeCounts(s.start), s.surge.String(), s.unavail.String(), s.maxSkew, scope)
}

// generateScenario draws a scenario from a seed: 2 to 4 zones, 2 to 9
// replicas placed unevenly (some zones empty), a rolling update with
// maxSurge and maxUnavailable as numbers or percentages.
func generateScenario(seed uint64) endStateScenario {
	r := rand.New(rand.NewPCG(seed, 19))
	s := endStateScenario{seed: seed, replicas: 2 + r.IntN(8), maxSkew: int32(1 + r.IntN(2)), allRevisions: r.IntN(2) == 0, start: map[string]int{}}
	for z := range 2 + r.IntN(3) {
		s.zones = append(s.zones, fmt.Sprintf("zone-%c", 'a'+z))
	}
	// Crowd the first zones: starting placements that a rollout must move.
	for range s.replicas {
		s.start[s.zones[r.IntN(1+r.IntN(len(s.zones)))]]++
	}
	surges := []intstr.IntOrString{intstr.FromInt32(0), intstr.FromInt32(1), intstr.FromInt32(2), intstr.FromString("25%"), intstr.FromString("50%")}
	unavails := []intstr.IntOrString{intstr.FromInt32(0), intstr.FromInt32(1), intstr.FromString("25%"), intstr.FromString("34%")}
	s.surge, s.unavail = surges[r.IntN(len(surges))], unavails[r.IntN(len(unavails))]
	if s.surge.String() == "0" && s.unavail.String() == "0" {
		s.unavail = intstr.FromInt32(1)
	}
	return s
}

// endStateScenarios is how many generated rollouts the differential test
// replays against the real kube-controller-manager and kube-scheduler.
const endStateScenarios = 30

var _ = Describe("Predicted rollout end states against the real controllers", Label("differential", "spread"), func() {
	It(fmt.Sprintf("predicts where %d generated rollouts under a hard zone spread leave the new pods", endStateScenarios), func(ctx SpecContext) {
		replaySeeds(ctx, "rollout end states", endStateScenarios, generateScenario, replayEndState)
	}, NodeTimeout(10*time.Minute))
})

// replayGenerated replays the scenarios of seeds 1 to n, six at a time, each
// on its own nodes and namespace; it reports every scenario's line under
// title and fails with those that disagreed.
func replayGenerated(ctx context.Context, title string, n uint64, replay func(context.Context, uint64) (string, error)) {
	var mu sync.Mutex
	var failures, report []string
	sem := make(chan struct{}, 6)
	var wg sync.WaitGroup
	for seed := uint64(1); seed <= n; seed++ {
		wg.Add(1)
		go func() {
			defer GinkgoRecover()
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			line, err := replay(ctx, seed)
			mu.Lock()
			defer mu.Unlock()
			report = append(report, line)
			if err != nil {
				failures = append(failures, err.Error())
			}
		}()
	}
	wg.Wait()
	sort.Strings(report)
	AddReportEntry(title, strings.Join(report, "\n"))
	Expect(failures).To(BeEmpty())
}

// replaySeeds draws the scenario of each seed from 1 to n, replays it with
// replayGenerated, and names the scenario in each failure.
func replaySeeds[S fmt.Stringer](ctx context.Context, title string, n uint64, generate func(uint64) S, replay func(context.Context, S) (string, error)) {
	replayGenerated(ctx, title, n, func(ctx context.Context, seed uint64) (string, error) {
		sc := generate(seed)
		line, err := replay(ctx, sc)
		if err != nil {
			err = fmt.Errorf("%s: %w", sc, err)
		}
		return line, err
	})
}

// replayEndState sets a scenario up on its own nodes, predicts the end
// states from a snapshot of the live objects, rolls the spread out for
// real and checks that where the new pods ended is one of the predictions.
func replayEndState(ctx context.Context, sc endStateScenario) (string, error) {
	env, err := utils.NewEnv(ctx, cluster, k8sClient, fmt.Sprintf("endstate-%d", sc.seed))
	if err != nil {
		return "", err
	}
	defer func() { _ = env.Cleanup(context.Background()) }()
	zones, err := env.AddZones(ctx, sc.zones, 1)
	if err != nil {
		return "", err
	}
	d := utils.Deployment(env.Namespace, "web", env.Pool(), 0, nil)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &sc.surge, MaxUnavailable: &sc.unavail}}
	if err := k8sClient.Create(ctx, d); err != nil {
		return "", err
	}
	if err := env.PlaceReplicas(ctx, d, zones, sc.start); err != nil {
		return "", err
	}
	snap, w, err := liveWorkload(ctx, env, "web")
	if err != nil {
		return "", err
	}
	c := placement.Constraint{Spread: &placement.Spread{
		TopologyKey: utils.ZoneLabel, MaxSkew: sc.maxSkew, AllRevisions: sc.allRevisions,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
	}}.ForWorkload(pgv1.KindDeployment)
	spec, err := c.Apply(&w.Template.Spec, w.Selector, pgv1.StageHard)
	if err != nil {
		return "", err
	}
	w.Template.Spec = *spec
	predicted, err := snap.PredictEndStates(w, c, 100000)
	if err != nil {
		return "", err
	}
	if !predicted.Exhaustive {
		return "", fmt.Errorf("the search ran out of budget after %d states", predicted.Explored)
	}

	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Template.Spec.TopologySpreadConstraints = spec.TopologySpreadConstraints
	if err := k8sClient.Patch(ctx, d, patch); err != nil {
		return "", err
	}
	got, stuck, err := waitRolloutEnd(ctx, env, zones)
	if err != nil {
		return "", err
	}
	line := fmt.Sprintf("%s -> %s (%d predicted, %d skewed, %d states)", sc, placement.DescribeCounts(got), len(predicted.States), len(predicted.Skewed()), predicted.Explored)
	if stuck {
		if !predicted.Stuck {
			return line, fmt.Errorf("the rollout stuck at %s, which no prediction allowed", placement.DescribeCounts(got))
		}
		return line + " stuck, as predicted possible", nil
	}
	for _, st := range predicted.States {
		if placement.DescribeCounts(st.NewPods) == placement.DescribeCounts(got) {
			return line, nil
		}
	}
	var want []string
	for _, st := range predicted.States {
		want = append(want, "("+placement.DescribeCounts(st.NewPods)+")")
	}
	return line, fmt.Errorf("the rollout ended at %s, not among the predicted %s", placement.DescribeCounts(got), strings.Join(want, " "))
}

// liveWorkload builds the engine's snapshot of the spec's nodes and pods
// and the Deployment's workload, as the operator sees them.
func liveWorkload(ctx context.Context, env *utils.Env, name string) (*placement.Snapshot, *placement.Workload, error) {
	var nodes corev1.NodeList
	if err := k8sClient.List(ctx, &nodes, client.MatchingLabels{utils.PoolLabel: env.Pool()}); err != nil {
		return nil, nil, err
	}
	var pods corev1.PodList
	if err := k8sClient.List(ctx, &pods, client.InNamespace(env.Namespace)); err != nil {
		return nil, nil, err
	}
	var rss appsv1.ReplicaSetList
	if err := k8sClient.List(ctx, &rss, client.InNamespace(env.Namespace)); err != nil {
		return nil, nil, err
	}
	d := &appsv1.Deployment{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: name}, d); err != nil {
		return nil, nil, err
	}
	var objs placement.Objects
	var livePods []*corev1.Pod
	for i := range nodes.Items {
		objs.Nodes = append(objs.Nodes, &nodes.Items[i])
	}
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil {
			objs.Pods = append(objs.Pods, &pods.Items[i])
			livePods = append(livePods, &pods.Items[i])
		}
	}
	replicaSets := make([]*appsv1.ReplicaSet, len(rss.Items))
	for i := range rss.Items {
		replicaSets[i] = &rss.Items[i]
	}
	snap, err := placement.NewSnapshot(objs)
	if err != nil {
		return nil, nil, err
	}
	return snap, targets.FromDeployment(d, replicaSets, livePods), nil
}

// waitRolloutEnd waits until the Deployment has rolled out and returns its
// new pods per zone; or, when a new pod stays unschedulable with nothing
// changing for 20 s, returns the pods placed so far and stuck.
func waitRolloutEnd(ctx context.Context, env *utils.Env, zones utils.Zones) (map[string]int, bool, error) {
	var got map[string]int
	stuck := false
	var lastChange time.Time
	var lastPlacement string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		d := &appsv1.Deployment{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: "web"}, d); err != nil {
			return false, err
		}
		pods, err := utils.PodsOf(ctx, k8sClient, env.Namespace, map[string]string{"app": "web"})
		if err != nil {
			return false, err
		}
		_, w, err := liveWorkload(ctx, env, "web")
		if err != nil {
			return false, err
		}
		var current []corev1.Pod
		pending := false
		for _, p := range pods {
			if w.Revision != "" && p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == w.Revision {
				current = append(current, p)
			}
			if unschedulable, _ := utils.Unschedulable(p); unschedulable {
				pending = true
			}
		}
		got = zones.Count(current)
		if utils.RolledOut(d) && len(pods) == int(*d.Spec.Replicas) {
			return true, nil
		}
		if placement := utils.Placement(pods); placement != lastPlacement {
			lastPlacement, lastChange = placement, time.Now()
		}
		if pending && time.Since(lastChange) > 20*time.Second {
			stuck = true
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return got, false, fmt.Errorf("the rollout neither ended nor stuck: %w (pods %s)", err, lastPlacement)
	}
	return got, stuck, nil
}
