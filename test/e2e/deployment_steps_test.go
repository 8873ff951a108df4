package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
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
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/test/utils"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// stepsScenario is one generated Deployment rollout: pods placed unevenly
// over nodes (some doubled up), some with a pod-deletion-cost, then a new
// template rolled out with a rolling update's surge and unavailability.
type stepsScenario struct {
	seed uint64
	unevenPods
	surge, unavail intstr.IntOrString
}

func (s stepsScenario) String() string {
	return fmt.Sprintf("seed %d: %s, %d cost(s), maxSurge %s maxUnavailable %s",
		s.seed, placement.DescribeCounts(s.start), len(s.costs), s.surge.String(), s.unavail.String())
}

func generateSteps(seed uint64) stepsScenario {
	r := rand.New(rand.NewPCG(seed, 37))
	u, _ := drawUneven(r, 3, 4)
	s := stepsScenario{seed: seed, unevenPods: u}
	surges := []intstr.IntOrString{intstr.FromInt32(0), intstr.FromInt32(1), intstr.FromInt32(2), intstr.FromString("25%")}
	unavails := []intstr.IntOrString{intstr.FromInt32(0), intstr.FromInt32(1), intstr.FromInt32(2), intstr.FromString("50%")}
	s.surge, s.unavail = surges[r.IntN(len(surges))], unavails[r.IntN(len(unavails))]
	if s.surge.String() == "0" && s.unavail.String() == "0" {
		s.unavail = intstr.FromInt32(1)
	}
	return s
}

// stepsScenarios is how many generated rollouts are replayed.
const stepsScenarios = 24

var _ = Describe("The old pods a Deployment's rollout deletes, step by step, against the real controllers", Label("differential", "rollout-steps"), func() {
	It(fmt.Sprintf("predicts each of the ReplicaSet controller's deletions in %d generated rollouts, beside the new pods where the scheduler put them", stepsScenarios), func(ctx SpecContext) {
		replaySeeds(ctx, "rollout steps", stepsScenarios, generateSteps, replaySteps)
	}, NodeTimeout(10*time.Minute))
})

// podEvent is a pod as a watch reported it, and when.
type podEvent struct {
	at   time.Time
	pod  *corev1.Pod
	gone bool
}

// replaySteps rolls a new template out for real while it watches every pod
// and the old ReplicaSet. Each time the Deployment controller scales the
// old ReplicaSet down, the ReplicaSet controller picks the pods to delete;
// the engine's pick, made on the pods as they stood at some moment between
// the scale-down and the first deletion (the new pods where the scheduler
// put them), must be one the controller could not tell apart from its own.
func replaySteps(ctx context.Context, sc stepsScenario) (string, error) {
	env, err := utils.NewEnv(ctx, cluster, k8sClient, fmt.Sprintf("steps-%d", sc.seed))
	if err != nil {
		return "", err
	}
	defer func() { _ = env.Cleanup(context.Background()) }()
	d, err := sc.place(ctx, env, func(d *appsv1.Deployment) {
		// Available a second after Ready: the Deployment controller's
		// scale-downs come apart in time, so each one's deletions are told
		// apart.
		d.Spec.MinReadySeconds = 1
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &sc.surge, MaxUnavailable: &sc.unavail}}
	})
	if err != nil {
		return "", err
	}
	var nodes corev1.NodeList
	if err := k8sClient.List(ctx, &nodes, client.MatchingLabels{utils.PoolLabel: env.Pool()}); err != nil {
		return "", err
	}

	rec, err := recordRollout(ctx, env)
	if err != nil {
		return "", err
	}
	live := &appsv1.Deployment{}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(d), live); err != nil {
		return "", err
	}
	oldRS := replicaSetOf(ctx, env, live)
	patch := client.MergeFrom(live.DeepCopy())
	live.Spec.Template.Annotations = map[string]string{"placementguard.io/rollout": strconv.FormatUint(sc.seed, 10)}
	if err := k8sClient.Patch(ctx, live, patch); err != nil {
		rec.stop()
		return "", err
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(d), live); err != nil {
			return false, err
		}
		now, err := utils.PodsOf(ctx, k8sClient, env.Namespace, map[string]string{"app": "web"})
		return utils.RolledOut(live) && len(now) == int(*live.Spec.Replicas), err
	})
	rec.stop()
	if err != nil {
		return "", fmt.Errorf("the rollout did not end: %w", err)
	}
	return rec.judge(sc, nodes.Items, oldRS)
}

// rolloutRecord is what two watches saw during a rollout: every pod
// event, and when the old ReplicaSet's replicas were lowered.
type rolloutRecord struct {
	mu         sync.Mutex
	pods       []podEvent
	scaleDowns map[string][]time.Time
	stop       func()
}

func recordRollout(ctx context.Context, env *utils.Env) (*rolloutRecord, error) {
	rec := &rolloutRecord{scaleDowns: map[string][]time.Time{}}
	listed := time.Now()
	podList, err := cluster.Clientset.CoreV1().Pods(env.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range podList.Items {
		rec.pods = append(rec.pods, podEvent{at: listed, pod: &podList.Items[i]})
	}
	rsList, err := cluster.Clientset.AppsV1().ReplicaSets(env.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	podWatch, err := cluster.Clientset.CoreV1().Pods(env.Namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: podList.ResourceVersion})
	if err != nil {
		return nil, err
	}
	rsWatch, err := cluster.Clientset.AppsV1().ReplicaSets(env.Namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: rsList.ResourceVersion})
	if err != nil {
		podWatch.Stop()
		return nil, err
	}
	replicas := map[string]int32{}
	for _, rs := range rsList.Items {
		replicas[rs.Name] = *rs.Spec.Replicas
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for ev := range podWatch.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok {
				rec.mu.Lock()
				rec.pods = append(rec.pods, podEvent{at: time.Now(), pod: p, gone: ev.Type == watch.Deleted})
				rec.mu.Unlock()
			}
		}
	}()
	go func() {
		defer wg.Done()
		for ev := range rsWatch.ResultChan() {
			if rs, ok := ev.Object.(*appsv1.ReplicaSet); ok && rs.Spec.Replicas != nil {
				rec.mu.Lock()
				if prev, seen := replicas[rs.Name]; seen && *rs.Spec.Replicas < prev {
					rec.scaleDowns[rs.Name] = append(rec.scaleDowns[rs.Name], time.Now())
				}
				replicas[rs.Name] = *rs.Spec.Replicas
				rec.mu.Unlock()
			}
		}
	}()
	rec.stop = func() {
		podWatch.Stop()
		rsWatch.Stop()
		wg.Wait()
	}
	return rec, nil
}

// replicaSetOf is the name of the Deployment's ReplicaSet of its current
// template.
func replicaSetOf(ctx context.Context, env *utils.Env, d *appsv1.Deployment) string {
	_, w, err := liveWorkload(ctx, env, d.Name)
	if err != nil || w.Revision == "" {
		return ""
	}
	return d.Name + "-" + w.Revision
}

// stepBatch is one scale-down of the old ReplicaSet and the pods the
// ReplicaSet controller deleted for it.
type stepBatch struct {
	scaled, firstDeletion time.Time
	deleted               []string
}

// batches assigns each deletion of an old pod to the last scale-down of
// the old ReplicaSet before it.
func (r *rolloutRecord) batches(oldRS string) []stepBatch {
	var out []stepBatch
	for _, t := range r.scaleDowns[oldRS] {
		out = append(out, stepBatch{scaled: t})
	}
	seen := map[types.UID]bool{}
	for _, ev := range r.pods {
		p := ev.pod
		if !ownedBy(p, oldRS) || seen[p.UID] || (p.DeletionTimestamp == nil && !ev.gone) {
			continue
		}
		seen[p.UID] = true
		i := len(out) - 1
		for i >= 0 && out[i].scaled.After(ev.at) {
			i--
		}
		if i < 0 {
			continue
		}
		if len(out[i].deleted) == 0 {
			out[i].firstDeletion = ev.at
		}
		out[i].deleted = append(out[i].deleted, p.Name)
	}
	return slices.DeleteFunc(out, func(b stepBatch) bool { return len(b.deleted) == 0 })
}

// stateAt is every pod as the watch last reported it before t, those
// deleted left out.
func (r *rolloutRecord) stateAt(t time.Time) []*corev1.Pod {
	latest := map[types.UID]*corev1.Pod{}
	var order []types.UID
	for _, ev := range r.pods {
		if !ev.at.Before(t) {
			break
		}
		if _, ok := latest[ev.pod.UID]; !ok {
			order = append(order, ev.pod.UID)
		}
		latest[ev.pod.UID] = ev.pod
		if ev.gone {
			latest[ev.pod.UID] = nil
		}
	}
	var out []*corev1.Pod
	for _, uid := range order {
		if p := latest[uid]; p != nil {
			out = append(out, p)
		}
	}
	return out
}

// judge compares every batch of deletions with the engine's picks.
func (r *rolloutRecord) judge(sc stepsScenario, nodes []corev1.Node, oldRS string) (string, error) {
	batches := r.batches(oldRS)
	var said []string
	for _, b := range batches {
		said = append(said, fmt.Sprint(b.deleted))
	}
	line := fmt.Sprintf("%s -> deleted %s", sc, strings.Join(said, " then "))
	if len(batches) == 0 {
		return line, fmt.Errorf("no deletion of the old ReplicaSet %s's pods was seen", oldRS)
	}
	for _, b := range batches {
		if err := r.judgeBatch(b, nodes, oldRS); err != nil {
			return line, err
		}
	}
	return line, nil
}

// judgeBatch looks for a moment between a second before the scale-down
// and the first deletion at which the engine picks pods the controller
// cannot tell apart from those it deleted.
func (r *rolloutRecord) judgeBatch(b stepBatch, nodes []corev1.Node, oldRS string) error {
	from := b.scaled.Add(-time.Second)
	moments := []time.Time{from}
	for _, ev := range r.pods {
		if ev.at.After(from) && ev.at.Before(b.firstDeletion) {
			moments = append(moments, ev.at.Add(time.Nanosecond))
		}
	}
	var predicted []string
	for _, m := range moments {
		pods := r.stateAt(m)
		var objs placement.Objects
		var related []*corev1.Pod
		w := &placement.Workload{Kind: pgv1.KindDeployment, Name: "web"}
		for i := range nodes {
			objs.Nodes = append(objs.Nodes, &nodes[i])
		}
		var alive []corev1.Pod
		for _, p := range pods {
			if p.DeletionTimestamp != nil {
				continue
			}
			objs.Pods = append(objs.Pods, p)
			alive = append(alive, *p)
			if ownedBy(p, oldRS) {
				w.Pods = append(w.Pods, p.UID)
			} else {
				related = append(related, p)
			}
		}
		snap, err := placement.NewSnapshot(objs)
		if err != nil {
			return err
		}
		for t := from; !t.After(b.firstDeletion); t = t.Add(10 * time.Millisecond) {
			snap.SetNow(t)
			victims := snap.ScaleDownVictims(w, len(b.deleted), related...)
			keys := rankKeys(alive, t)
			if keysOf(keys, victims) == keysOf(keys, b.deleted) {
				return nil
			}
			predicted = append(predicted, fmt.Sprint(victims))
		}
	}
	slices.Sort(predicted)
	return fmt.Errorf("the controller deleted %v after the scale-down at %s; the engine picked %s over %d moment(s)",
		b.deleted, b.scaled.Format("15:04:05.000"), strings.Join(slices.Compact(predicted), " or "), len(moments))
}

func ownedBy(p *corev1.Pod, rs string) bool {
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.Kind == "ReplicaSet" && ref.Name == rs
}
