package e2e

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/test/utils"
)

// scaleDownScenario is one generated scale-down: a Deployment's pods
// placed unevenly over nodes (some doubled up), some with a
// pod-deletion-cost, then scaled down by some.
type scaleDownScenario struct {
	seed uint64
	unevenPods
	by int
}

// unevenPods are a Deployment's pods placed unevenly over nodes, one node
// a zone, some doubled up, some with a pod-deletion-cost.
type unevenPods struct {
	nodes []string
	start map[string]int
	// costs are the pod-deletion-cost given to the i-th pod in name order,
	// when drawn.
	costs map[int]int
}

// drawUneven draws 2 to 4 nodes, up to perNode-1 pods on each (at least 2
// in all), and a cost for one pod in costOneIn; it returns the pods' count.
func drawUneven(r *rand.Rand, perNode, costOneIn int) (unevenPods, int) {
	u := unevenPods{start: map[string]int{}, costs: map[int]int{}}
	for n := range 2 + r.IntN(3) {
		u.nodes = append(u.nodes, fmt.Sprintf("zone-%c", 'a'+n))
	}
	total := 0
	for total < 2 {
		for _, n := range u.nodes {
			c := r.IntN(perNode)
			u.start[n] += c
			total += c
		}
	}
	for i := range total {
		if r.IntN(costOneIn) == 0 {
			u.costs[i] = []int{-5, 0, 7}[r.IntN(3)]
		}
	}
	return u, total
}

// place creates the Deployment d (made by shape when not nil) in env with
// no replicas, scales it up where u says and gives the pods their costs.
func (u unevenPods) place(ctx context.Context, env *utils.Env, shape func(*appsv1.Deployment)) (*appsv1.Deployment, error) {
	zones, err := env.AddZones(ctx, u.nodes, 1)
	if err != nil {
		return nil, err
	}
	d := utils.Deployment(env.Namespace, "web", env.Pool(), 0, nil)
	if shape != nil {
		shape(d)
	}
	if err := k8sClient.Create(ctx, d); err != nil {
		return nil, err
	}
	if err := env.PlaceReplicas(ctx, d, zones, u.start); err != nil {
		return nil, err
	}
	pods, err := utils.PodsOf(ctx, k8sClient, env.Namespace, map[string]string{"app": "web"})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for i, c := range u.costs {
		patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"%d"}}}`, corev1.PodDeletionCost, c))
		if err := k8sClient.Patch(ctx, &pods[i], patch); err != nil {
			return nil, err
		}
	}
	return d, waitControllerSeesReady(ctx, d, len(pods))
}

// waitControllerSeesReady waits until the Deployment's status, which the
// controllers compute from their own caches, counts n pods ready and
// available: the ReplicaSet controller then ranks the pods as the test
// sees them, not as they were while they started.
func waitControllerSeesReady(ctx context.Context, d *appsv1.Deployment, n int) error {
	live := &appsv1.Deployment{}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(d), live); err != nil {
			return false, err
		}
		s := live.Status
		return s.ObservedGeneration >= live.Generation && int(s.Replicas) == n && int(s.ReadyReplicas) == n && int(s.AvailableReplicas) == n, nil
	})
	if err != nil {
		return fmt.Errorf("the Deployment's status never counted %d pods ready (%+v): %w", n, live.Status, err)
	}
	return nil
}

func (s scaleDownScenario) String() string {
	return fmt.Sprintf("seed %d: %s, %d cost(s), scaled down by %d", s.seed, placement.DescribeCounts(s.start), len(s.costs), s.by)
}

func generateScaleDown(seed uint64) scaleDownScenario {
	r := rand.New(rand.NewPCG(seed, 23))
	u, total := drawUneven(r, 4, 3)
	return scaleDownScenario{seed: seed, unevenPods: u, by: 1 + r.IntN(total-1)}
}

const scaleDownScenarios = 24

var _ = Describe("Predicted scale-down victims against the real ReplicaSet controller", Label("differential", "scaledown"), func() {
	It(fmt.Sprintf("predicts which pods %d generated scale-downs delete", scaleDownScenarios), func(ctx SpecContext) {
		replaySeeds(ctx, "scale-down victims", scaleDownScenarios, generateScaleDown, replayScaleDown)
	}, NodeTimeout(6*time.Minute))
})

// replayScaleDown places the scenario's pods, predicts the victims from a
// snapshot of the live objects, scales the Deployment down for real and
// compares. Pods the controller cannot tell apart (the same node count,
// cost, ready and creation time) are interchangeable, so victims are
// compared by what the controller ranks them by. The controller compares
// ages on a logarithmic scale relative to when it looks, so the prediction
// is made for each moment between the scale-down and the deletions, and
// one of them must match.
func replayScaleDown(ctx context.Context, sc scaleDownScenario) (string, error) {
	env, err := utils.NewEnv(ctx, cluster, k8sClient, fmt.Sprintf("scaledown-%d", sc.seed))
	if err != nil {
		return "", err
	}
	defer func() { _ = env.Cleanup(context.Background()) }()
	d, err := sc.place(ctx, env, nil)
	if err != nil {
		return "", err
	}
	snap, w, err := liveWorkload(ctx, env, "web")
	if err != nil {
		return "", err
	}
	live, err := utils.PodsOf(ctx, k8sClient, env.Namespace, map[string]string{"app": "web"})
	if err != nil {
		return "", err
	}
	before := time.Now()
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = ptr.To(int32(len(live) - sc.by))
	if err := k8sClient.Patch(ctx, d, patch); err != nil {
		return "", err
	}
	deleted, err := waitDeleted(ctx, env, live, sc.by)
	if err != nil {
		return "", err
	}
	after := time.Now()

	// The controller looked at some moment between the two: every
	// prediction for a moment in between is one it could have made.
	predictions := map[string][]string{}
	for t := before; !t.After(after); t = t.Add(10 * time.Millisecond) {
		snap.SetNow(t)
		victims := snap.ScaleDownVictims(w, sc.by)
		keys := rankKeys(live, t)
		if keysOf(keys, victims) == keysOf(keys, deleted) {
			return fmt.Sprintf("%s -> deleted %v, predicted at %s", sc, deleted, t.Sub(before).Round(10*time.Millisecond)), nil
		}
		predictions[fmt.Sprint(victims)] = victims
	}
	keys := rankKeys(live, time.Time{})
	var want []string
	for _, v := range predictions {
		want = append(want, fmt.Sprintf("%v (%s)", v, keysOf(keys, v)))
	}
	slices.Sort(want)
	return fmt.Sprintf("%s -> deleted %v", sc, deleted), fmt.Errorf("deleted %v (%s), predicted %s over %s",
		deleted, keysOf(keys, deleted), strings.Join(want, " or "), after.Sub(before).Round(10*time.Millisecond))
}

// rankKeys is, per pod, what the ReplicaSet controller ranks it by besides
// its uid: the Deployment's pods on its node, its deletion cost, and its
// ready and creation times (all the pods here are Running and Ready). At a
// moment now, the times are the power of two of their age then: within
// one the controller orders pods by uid, but pods of the same second
// (timestamps have no finer grain) are equal to it, so that the order
// depends on its sort and on its cache's list order; pods of one power of
// two are taken as interchangeable.
func rankKeys(pods []corev1.Pod, now time.Time) map[string]string {
	onNode := map[string]int{}
	for _, p := range pods {
		onNode[p.Spec.NodeName]++
	}
	when := func(t time.Time) string {
		if now.IsZero() || t.IsZero() {
			return t.UTC().Format(time.RFC3339)
		}
		if d := now.Sub(t); d > 0 {
			return fmt.Sprintf("2^%d", int64(math.Log2(float64(d))))
		}
		return "future"
	}
	keys := map[string]string{}
	for _, p := range pods {
		ready := ""
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				ready = when(c.LastTransitionTime.Time)
			}
		}
		// No annotation is a cost of 0.
		cost, _ := strconv.Atoi(p.Annotations[corev1.PodDeletionCost])
		keys[p.Name] = fmt.Sprintf("%d/%d/%s/%s", onNode[p.Spec.NodeName], cost, ready, when(p.CreationTimestamp.Time))
	}
	return keys
}

// keysOf is the sorted rank keys of the named pods: equal for two sets of
// victims the controller cannot tell apart.
func keysOf(keys map[string]string, names []string) string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, keys[n])
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// waitDeleted waits until n of the pods are deleted or being deleted and
// returns their names, sorted.
func waitDeleted(ctx context.Context, env *utils.Env, pods []corev1.Pod, n int) ([]string, error) {
	var deleted []string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		now, err := utils.PodsOf(ctx, k8sClient, env.Namespace, map[string]string{"app": "web"})
		if err != nil {
			return false, err
		}
		alive := map[string]bool{}
		for _, p := range now {
			if p.DeletionTimestamp == nil {
				alive[p.Name] = true
			}
		}
		deleted = deleted[:0]
		for _, p := range pods {
			if !alive[p.Name] {
				deleted = append(deleted, p.Name)
			}
		}
		return len(deleted) >= n, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for %d deletions (saw %v): %w", n, deleted, err)
	}
	if len(deleted) > n {
		return nil, fmt.Errorf("%d pods deleted, not %d: %v", len(deleted), n, deleted)
	}
	slices.Sort(deleted)
	return deleted, nil
}
