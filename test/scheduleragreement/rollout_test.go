package scheduleragreement

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/placement-guard/placement-guard/test/localcluster"
)

// A Deployment's rollout on the real cluster, step by step: the
// kube-controller-manager makes every pod (the first ReplicaSet's, then
// the new revision's while the old pods it scales down stay terminating),
// and kube-scheduler places each. A scheduling gate on the template holds
// each pod until the ReplicaSets have settled and the engine has been
// asked where it lands, on the cluster as the API server has it then;
// the gate's removal reaches the scheduler after every change before it,
// so the scheduler decides on the same cluster the engine was asked
// about.

// stepGate holds a rollout's pod until the engine has been asked about it.
const stepGate = "placementguard.io/agreement-step"

// rolloutLabel selects one rollout's pods alone: the generated apps'
// other pods share their app label, and a ReplicaSet adopts the orphans
// its selector matches.
const rolloutLabel = "placementguard.io/rollout"

// rolloutTally counts what the rollouts checked.
type rolloutTally struct {
	rollouts, steps, beside, pending int
}

// runRollout rolls one generated Deployment out on the scenario's nodes
// and pods and checks every step; it reports whether each agreed.
func runRollout(ctx context.Context, t *testing.T, c *localcluster.Cluster, rec *filterRecorder, seed int64, sc scenario, tally *rolloutTally) bool {
	t.Helper()
	cs := c.Clientset
	// The rollout's own old pods are the ones left terminating here.
	for _, p := range sc.existing {
		p.Finalizers = nil
	}
	defer createScenario(ctx, t, c, seed, sc)()
	waitExistingRunning(ctx, t, c, seed, sc.existing)

	d := deploymentOf(seed, sc.pending)
	d, err := cs.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("seed %d: create Deployment: %v", seed, err)
	}
	defer endRollout(t, c, seed, d)
	tally.rollouts++
	if !placeSteps(ctx, t, c, rec, seed, d, tally) {
		return false
	}
	if rolledOut(ctx, t, c, d) {
		// The old pods stay terminating while the new revision's are
		// placed: a finalizer holds them, as their containers stopping
		// would.
		holdPods(ctx, t, c, seed, d)
		patch := []byte(`{"spec":{"template":{"metadata":{"annotations":{"placementguard.io/revision":"2"}}}}}`)
		if _, err := cs.AppsV1().Deployments(d.Namespace).Patch(ctx, d.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("seed %d: roll Deployment out: %v", seed, err)
		}
		return placeSteps(ctx, t, c, rec, seed, d, tally)
	}
	return true
}

// deploymentOf is a Deployment of the generated pod: 2 to 4 replicas, a
// rolling update that surges one pod at a time, and, in half of the
// rollouts, the pod's spread counting its own revision's pods
// (matchLabelKeys pod-template-hash).
func deploymentOf(seed int64, p *corev1.Pod) *appsv1.Deployment {
	r := rand.New(rand.NewSource(seed*7919 + 11))
	labels := map[string]string{rolloutLabel: p.Namespace}
	for k, v := range p.Labels {
		labels[k] = v
	}
	spec := *p.Spec.DeepCopy()
	spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: stepGate}}
	for i := range spec.TopologySpreadConstraints {
		if r.Intn(2) == 0 {
			spec.TopologySpreadConstraints[i].MatchLabelKeys = []string{appsv1.DefaultDeploymentUniqueLabelKey}
		}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: "roll"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptrTo(int32(2 + r.Intn(3))),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{rolloutLabel: p.Namespace}},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptrTo(intstr.FromInt32(1)), MaxUnavailable: ptrTo(intstr.FromInt32(0))}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
}

// placeSteps lets the rollout's gated pods through one at a time, each
// once the ReplicaSets have settled and the engine has been asked about
// it, until the rollout makes no more pods or one stays Pending. It
// reports whether every step agreed.
func placeSteps(ctx context.Context, t *testing.T, c *localcluster.Cluster, rec *filterRecorder, seed int64, d *appsv1.Deployment, tally *rolloutTally) bool {
	t.Helper()
	for {
		gated, terminating, ok := settledStep(ctx, t, c, seed, d)
		if !ok {
			return true
		}
		pod := gated.DeepCopy()
		pod.Spec.SchedulingGates = nil
		verdict, landing := engineVerdict(ctx, t, c, seed, pod)
		patch := []byte(`{"spec":{"schedulingGates":null}}`)
		if _, err := c.Clientset.CoreV1().Pods(gated.Namespace).Patch(ctx, gated.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("seed %d: let %s through: %v", seed, gated.Name, err)
		}
		decided := waitDecided(ctx, t, c, seed, gated)
		tally.steps++
		if terminating > 0 {
			tally.beside++
		}
		if decided.Spec.NodeName == "" {
			tally.pending++
			if want := schedulerMessage(decided); verdict.Schedulable || verdict.Message != want {
				t.Errorf("seed %d: rollout pod %s: kube-scheduler says %q; the engine allows %v and says %q", seed, gated.Name, want, verdict.Nodes, verdict.Message)
				return false
			}
			return true
		}
		allowed, _ := rec.nodesFor(gated.UID)
		if !verdict.Schedulable || !slices.Equal(verdict.Nodes, allowed) || !slices.Contains(landing.Best, decided.Spec.NodeName) {
			t.Errorf("seed %d: rollout pod %s (%d terminating pods of the Deployment beside): kube-scheduler allowed %v and bound it to %s; the engine allows %v and scores best %v (ranking %+v)",
				seed, gated.Name, terminating, allowed, decided.Spec.NodeName, verdict.Nodes, landing.Best, landing.Ranking)
			return false
		}
	}
}

// settledStep waits until the Deployment's controllers have done what the
// last step let them do: every ReplicaSet holds as many pods that are not
// terminating as it asks for, and one of them is gated, which it returns
// with how many of the Deployment's pods are terminating. It reports false
// once the rollout makes no more pods.
func settledStep(ctx context.Context, t *testing.T, c *localcluster.Cluster, seed int64, d *appsv1.Deployment) (*corev1.Pod, int, bool) {
	t.Helper()
	var gated *corev1.Pod
	var terminating int
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		gated, terminating = nil, 0
		sets, pods, err := listRollout(ctx, c, d)
		if err != nil {
			return false, err
		}
		live := map[types.UID]int32{}
		for i := range pods {
			p := &pods[i]
			if p.DeletionTimestamp != nil {
				terminating++
				continue
			}
			if ref := metav1.GetControllerOf(p); ref != nil {
				live[ref.UID]++
			}
			if len(p.Spec.SchedulingGates) > 0 && gated == nil {
				gated = p
			}
		}
		for _, rs := range sets {
			if live[rs.UID] != *rs.Spec.Replicas {
				return false, nil
			}
		}
		if gated != nil {
			return true, nil
		}
		return rolledOut(ctx, t, c, d), nil
	})
	if err != nil {
		t.Fatalf("seed %d: the rollout of %s/%s did not settle: %v", seed, d.Namespace, d.Name, err)
	}
	return gated, terminating, gated != nil
}

// rolledOut reports whether the Deployment's controller has made every
// pod of its current revision available.
func rolledOut(ctx context.Context, t *testing.T, c *localcluster.Cluster, d *appsv1.Deployment) bool {
	t.Helper()
	got, err := c.Clientset.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := got.Status
	return st.ObservedGeneration == got.Generation && st.UpdatedReplicas == *got.Spec.Replicas &&
		st.AvailableReplicas == *got.Spec.Replicas && st.Replicas == *got.Spec.Replicas
}

func listRollout(ctx context.Context, c *localcluster.Cluster, d *appsv1.Deployment) ([]appsv1.ReplicaSet, []corev1.Pod, error) {
	sel := metav1.ListOptions{LabelSelector: rolloutLabel + "=" + d.Namespace}
	sets, err := c.Clientset.AppsV1().ReplicaSets(d.Namespace).List(ctx, sel)
	if err != nil {
		return nil, nil, err
	}
	pods, err := c.Clientset.CoreV1().Pods(d.Namespace).List(ctx, sel)
	if err != nil {
		return nil, nil, err
	}
	return sets.Items, pods.Items, nil
}

// waitDecided waits until the scheduler bound the pod or found it
// unschedulable.
func waitDecided(ctx context.Context, t *testing.T, c *localcluster.Cluster, seed int64, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	var decided *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := c.Clientset.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		decided = p
		if p.Spec.NodeName != "" {
			return true, nil
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Reason == corev1.PodReasonUnschedulable {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("seed %d: the scheduler did not decide %s: %v", seed, pod.Name, err)
	}
	return decided
}

// holdPods puts the hold finalizer on the Deployment's pods.
func holdPods(ctx context.Context, t *testing.T, c *localcluster.Cluster, seed int64, d *appsv1.Deployment) {
	t.Helper()
	_, pods, err := listRollout(ctx, c, d)
	if err != nil {
		t.Fatal(err)
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"finalizers":[%q]}}`, holdFinalizer))
	for _, p := range pods {
		if _, err := c.Clientset.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("seed %d: hold %s: %v", seed, p.Name, err)
		}
	}
}

// endRollout deletes the Deployment and waits until every pod of it is
// gone: a gated or unschedulable pod left in the scheduler's queue would
// be decided on the next scenario's nodes.
func endRollout(t *testing.T, c *localcluster.Cluster, seed int64, d *appsv1.Deployment) {
	t.Helper()
	ctx := context.Background()
	cs := c.Clientset
	if err := cs.AppsV1().Deployments(d.Namespace).Delete(ctx, d.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("seed %d: delete Deployment: %v", seed, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		sets, pods, err := listRollout(ctx, c, d)
		if err != nil {
			return false, err
		}
		for i := range pods {
			release(t, c, []*corev1.Pod{&pods[i]})
			_ = cs.CoreV1().Pods(d.Namespace).Delete(ctx, pods[i].Name, metav1.DeleteOptions{GracePeriodSeconds: ptrTo[int64](0)})
		}
		for _, rs := range sets {
			_ = cs.AppsV1().ReplicaSets(d.Namespace).Delete(ctx, rs.Name, metav1.DeleteOptions{})
		}
		return len(pods) == 0 && len(sets) == 0, nil
	})
	if err != nil {
		t.Fatalf("seed %d: the rollout's pods are not gone: %v", seed, err)
	}
}
