package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/targets"
	"github.com/placement-guard/placement-guard/test/utils"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// orderScenario is one generated StatefulSet rollout: pods placed by the
// scheduler on a few nodes, then the template given a hostname
// anti-affinity among its own pods, soft or hard.
type orderScenario struct {
	seed      uint64
	nodes     int
	replicas  int32
	partition int32
	onDelete  bool
	parallel  bool
	minReady  int32
	// maxUnavailable is the rolling update's, "" when unset (one).
	maxUnavailable string
	stage          pgv1.Stage
	// notReady are the ordinals whose old pods are made not Ready before
	// the rollout.
	notReady []int
}

func (s orderScenario) String() string {
	strategy := fmt.Sprintf("RollingUpdate partition %d", s.partition)
	if s.maxUnavailable != "" {
		strategy += " maxUnavailable " + s.maxUnavailable
	}
	if s.onDelete {
		strategy = "OnDelete"
	}
	policy := "OrderedReady"
	if s.parallel {
		policy = "Parallel"
	}
	unready := ""
	if len(s.notReady) > 0 {
		unready = fmt.Sprintf(", ordinals %v not Ready", s.notReady)
	}
	return fmt.Sprintf("seed %d: %d replicas on %d nodes, %s, %s, minReadySeconds %d, %s anti-affinity%s",
		s.seed, s.replicas, s.nodes, strategy, policy, s.minReady, s.stage, unready)
}

// batch is how many pods the rolling update takes down together, as the
// StatefulSet controller reads maxUnavailable.
func (s orderScenario) batch() int {
	if s.maxUnavailable == "" {
		return 1
	}
	n, _ := intstr.GetScaledValueFromIntOrPercent(ptr.To(intstr.Parse(s.maxUnavailable)), int(s.replicas), false)
	return max(n, 1)
}

// generateOrderScenario draws a scenario from a seed: 2 to 4 nodes, 1 to 5
// replicas, a partition in half of them, OnDelete in one in six, either pod
// management policy, a hard constraint in two of three, and in three of four
// a maxUnavailable of 2, 50 % or 3 (MaxUnavailableStatefulSet is on by
// default since 1.37).
func generateOrderScenario(seed uint64) orderScenario {
	r := rand.New(rand.NewPCG(seed, 23))
	s := orderScenario{seed: seed, nodes: 2 + r.IntN(3), replicas: int32(1 + r.IntN(5)), parallel: r.IntN(2) == 0,
		minReady: int32(r.IntN(2)), onDelete: r.IntN(6) == 0, stage: pgv1.StageHard}
	if r.IntN(2) == 0 {
		s.partition = int32(r.IntN(int(s.replicas) + 1))
	}
	if r.IntN(3) == 0 {
		s.stage = pgv1.StageSoft
	}
	// Drawn from a stream of its own, so the scenarios above keep their shape.
	if mu := rand.New(rand.NewPCG(seed, 29)).IntN(4); mu > 0 {
		s.maxUnavailable = []string{"", "2", "50%", "3"}[mu]
	}
	// In one in three, one or two pods the rollout replaces are not Ready
	// when it starts.
	if u := rand.New(rand.NewPCG(seed, 31)); u.IntN(3) == 0 && s.partition < s.replicas {
		for _, ord := range u.Perm(int(s.replicas - s.partition))[:min(1+u.IntN(2), int(s.replicas-s.partition))] {
			s.notReady = append(s.notReady, int(s.partition)+ord)
		}
		slices.Sort(s.notReady)
	}
	return s
}

// orderScenarios is how many generated StatefulSet rollouts are replayed.
const orderScenarios = 24

var _ = Describe("Simulated StatefulSet rollouts against the real controllers", Label("differential", "statefulset"), func() {
	It(fmt.Sprintf("replaces the pods of %d generated StatefulSets in the order, and stops where, the simulation says", orderScenarios), func(ctx SpecContext) {
		replaySeeds(ctx, "statefulset rollout order", orderScenarios, generateOrderScenario, replayOrder)
	}, NodeTimeout(10*time.Minute))
})

// replayOrder sets a scenario up on its own nodes, simulates the rollout
// from a snapshot of the live objects, rolls it out for real while watching
// which pods the StatefulSet controller deletes, and compares: the pods
// recreated and their order, whether the rollout completes, and the pod it
// stops at when it does not.
func replayOrder(ctx context.Context, sc orderScenario) (string, error) {
	env, err := utils.NewEnv(ctx, cluster, k8sClient, fmt.Sprintf("order-%d", sc.seed))
	if err != nil {
		return "", err
	}
	defer func() { _ = env.Cleanup(context.Background()) }()
	for i := range sc.nodes {
		if _, err := env.AddNode(ctx, fmt.Sprintf("n%d", i), nil); err != nil {
			return "", err
		}
	}
	sts := utils.StatefulSet(env.Namespace, "db", env.Pool(), sc.replicas)
	sts.Spec.MinReadySeconds = sc.minReady
	if sc.parallel {
		sts.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
	}
	sts.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To(sc.partition)}}
	if sc.maxUnavailable != "" {
		sts.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.Parse(sc.maxUnavailable))
	}
	if sc.onDelete {
		sts.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	}
	if err := k8sClient.Create(ctx, sts); err != nil {
		return "", err
	}
	if err := waitStatefulSetSettled(ctx, env, sc.replicas); err != nil {
		return "", fmt.Errorf("before the change: %w", err)
	}
	if err := makeNotReady(ctx, env, sc); err != nil {
		return "", err
	}

	snap, w, pods, err := liveStatefulSet(ctx, env)
	if err != nil {
		return "", err
	}
	c := placement.Constraint{AntiAffinity: &placement.AntiAffinity{TopologyKey: corev1.LabelHostname}}.ForWorkload(pgv1.KindStatefulSet)
	spec, err := c.Apply(&w.Template.Spec, w.Selector, sc.stage)
	if err != nil {
		return "", err
	}
	w.Template.Spec = *spec
	predicted, err := snap.SimulateRollout(w)
	if err != nil {
		return "", err
	}
	var wantDeleted []string
	for _, st := range predicted.Steps {
		if st.Action == placement.StepDelete {
			wantDeleted = append(wantDeleted, st.Pod)
		}
	}
	wantPending := predicted.LeftPending()

	uids := map[types.UID]string{}
	for _, p := range pods {
		uids[p.UID] = p.Name
	}
	list, err := cluster.Clientset.CoreV1().Pods(env.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	watcher, err := cluster.Clientset.CoreV1().Pods(env.Namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		return "", err
	}
	defer watcher.Stop()
	// A pod is counted when the controller's deletion reaches the API
	// server (its deletion timestamp is set), not when it is gone: kwok
	// removes pods after their grace, in no promised order, and under
	// load the second pod deleted can be gone first.
	var deletedMu sync.Mutex
	var deleted []string
	go func() {
		for ev := range watcher.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || (ev.Type != watch.Deleted && p.DeletionTimestamp == nil) {
				continue
			}
			name, old := uids[p.UID]
			if !old {
				continue
			}
			deletedMu.Lock()
			if !slices.Contains(deleted, name) {
				deleted = append(deleted, name)
			}
			deletedMu.Unlock()
		}
	}()

	live := &appsv1.StatefulSet{}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(sts), live); err != nil {
		return "", err
	}
	patch := client.MergeFrom(live.DeepCopy())
	live.Spec.Template.Spec.Affinity = spec.Affinity
	if err := k8sClient.Patch(ctx, live, patch); err != nil {
		return "", err
	}
	completes, pending, err := waitStatefulSetRolloutEnd(ctx, env, sc)
	if err != nil {
		return "", err
	}
	deletedMu.Lock()
	got := slices.Clone(deleted)
	deletedMu.Unlock()

	outcome := "completes"
	if !completes {
		outcome = fmt.Sprintf("stops with %v Pending", pending)
	}
	line := fmt.Sprintf("%s -> replaced %v, %s", sc, got, outcome)
	// Pods deleted together (maxUnavailable above one) go in any order.
	inOrder := func(a []string) []string { return a }
	if sc.batch() > 1 {
		inOrder = func(a []string) []string { a = slices.Clone(a); slices.Sort(a); return a }
	}
	switch {
	case completes != predicted.Completes:
		return line, fmt.Errorf("the simulation said completes=%v (%v Pending), the controller's rollout completes=%v", predicted.Completes, wantPending, completes)
	case !completes && !stopsAsSimulated(sc, pending, wantPending, wantDeleted):
		return line, fmt.Errorf("the rollout stopped with %v Pending, the simulation with %v", pending, wantPending)
	case !slices.Equal(inOrder(got), inOrder(wantDeleted)):
		return line, fmt.Errorf("the controller replaced %v in that order, the simulation %v", got, wantDeleted)
	}
	return line, nil
}

// stopsAsSimulated reports whether the pods a stopped rollout left Pending
// are the simulation's. One case is the controller's race, not the
// simulation's error: with OrderedReady and maxUnavailable above one, the
// StatefulSet controller deletes a batch of pods in one sync and keeps no
// expectations for them, so a sync that sees the highest ordinal gone
// before it sees the next one terminating recreates the highest first;
// the rollout then stops with more of the batch Pending than the
// simulation, which recreates in ordinal order. There the simulation's
// Pending pods must be among the real ones, and every real one among the
// pods the simulation replaces.
func stopsAsSimulated(sc orderScenario, pending, wantPending, wantDeleted []string) bool {
	if slices.Equal(pending, wantPending) {
		return true
	}
	if sc.parallel || sc.batch() < 2 {
		return false
	}
	for _, p := range wantPending {
		if !slices.Contains(pending, p) {
			return false
		}
	}
	for _, p := range pending {
		if !slices.Contains(wantDeleted, p) {
			return false
		}
	}
	return true
}

// makeNotReady turns the scenario's not-Ready ordinals not Ready (kwok
// leaves a Running pod's status alone) and waits until the StatefulSet
// controller counts them so.
func makeNotReady(ctx context.Context, env *utils.Env, sc orderScenario) error {
	if len(sc.notReady) == 0 {
		return nil
	}
	for _, ord := range sc.notReady {
		p := &corev1.Pod{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: fmt.Sprintf("db-%d", ord)}, p); err != nil {
			return err
		}
		patch := client.MergeFrom(p.DeepCopy())
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == corev1.PodReady || p.Status.Conditions[i].Type == corev1.ContainersReady {
				p.Status.Conditions[i].Status = corev1.ConditionFalse
				p.Status.Conditions[i].LastTransitionTime = metav1.Now()
			}
		}
		if err := k8sClient.Status().Patch(ctx, p, patch); err != nil {
			return fmt.Errorf("make %s not Ready: %w", p.Name, err)
		}
	}
	want := sc.replicas - int32(len(sc.notReady))
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		sts := &appsv1.StatefulSet{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: "db"}, sts); err != nil {
			return false, err
		}
		return sts.Status.ReadyReplicas == want, nil
	})
}

// liveStatefulSet builds the engine's snapshot of the spec's nodes and pods
// and the StatefulSet's workload, as the operator sees them.
func liveStatefulSet(ctx context.Context, env *utils.Env) (*placement.Snapshot, *placement.Workload, []*corev1.Pod, error) {
	var nodes corev1.NodeList
	if err := k8sClient.List(ctx, &nodes, client.MatchingLabels{utils.PoolLabel: env.Pool()}); err != nil {
		return nil, nil, nil, err
	}
	var list corev1.PodList
	if err := k8sClient.List(ctx, &list, client.InNamespace(env.Namespace)); err != nil {
		return nil, nil, nil, err
	}
	sts := &appsv1.StatefulSet{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: "db"}, sts); err != nil {
		return nil, nil, nil, err
	}
	var objs placement.Objects
	for i := range nodes.Items {
		objs.Nodes = append(objs.Nodes, &nodes.Items[i])
	}
	var pods []*corev1.Pod
	for i := range list.Items {
		pods = append(pods, &list.Items[i])
	}
	objs.Pods = pods
	snap, err := placement.NewSnapshot(objs)
	if err != nil {
		return nil, nil, nil, err
	}
	return snap, targets.FromStatefulSet(sts, pods), pods, nil
}

// waitStatefulSetSettled waits until every replica runs, is available and
// is of the current revision.
func waitStatefulSetSettled(ctx context.Context, env *utils.Env, replicas int32) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		sts := &appsv1.StatefulSet{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: "db"}, sts); err != nil {
			return false, err
		}
		st := sts.Status
		return st.ObservedGeneration == sts.Generation && st.AvailableReplicas == replicas && st.ReadyReplicas == replicas &&
			st.CurrentRevision == st.UpdateRevision, nil
	})
}

// waitStatefulSetRolloutEnd waits until every pod the rollout replaces runs
// the new revision and is available (completes), or pods of the new
// revision stay unschedulable with nothing changing for 10 s (it returns
// them, sorted) or, with pods made not Ready, nothing changes for 10 s.
// OnDelete replaces nothing: it waits 5 s and reports
// complete when no pod went.
func waitStatefulSetRolloutEnd(ctx context.Context, env *utils.Env, sc orderScenario) (bool, []string, error) {
	if sc.onDelete {
		select {
		case <-ctx.Done():
			return false, nil, ctx.Err()
		case <-time.After(5 * time.Second):
		}
		return true, nil, nil
	}
	var lastPlacement string
	var pending []string
	var lastChange time.Time
	completes := false
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		sts := &appsv1.StatefulSet{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: "db"}, sts); err != nil {
			return false, err
		}
		pods, err := utils.PodsOf(ctx, k8sClient, env.Namespace, map[string]string{"app": "db"})
		if err != nil {
			return false, err
		}
		st := sts.Status
		if st.ObservedGeneration == sts.Generation && st.UpdatedReplicas == sc.replicas-sc.partition &&
			st.AvailableReplicas == sc.replicas && len(pods) == int(sc.replicas) {
			completes = true
			return true, nil
		}
		pending = nil
		for _, p := range pods {
			if unschedulable, _ := utils.Unschedulable(p); unschedulable {
				pending = append(pending, p.Name)
			}
		}
		slices.Sort(pending)
		if placement := utils.Placement(pods); placement != lastPlacement {
			lastPlacement, lastChange = placement, time.Now()
		}
		// A rollout stops at a Pending pod, or, OrderedReady, at a pod that
		// is not Ready.
		return (len(pending) > 0 || len(sc.notReady) > 0) && time.Since(lastChange) > 10*time.Second, nil
	})
	if err != nil {
		return false, nil, fmt.Errorf("the rollout neither completed nor stopped: %w (pods %s)", err, lastPlacement)
	}
	return completes, pending, nil
}
