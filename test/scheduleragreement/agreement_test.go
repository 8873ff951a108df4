// Package scheduleragreement checks the placement engine against the real
// kube-scheduler: for generated small clusters, the engine's verdict on a
// pending pod (schedulable or not, the allowed nodes, the scheduler's
// message) must be the scheduler's, and the node the scheduler binds it
// to one the engine scores best.
package scheduleragreement

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/test/localcluster"
)

// TestEngineAgreesWithKubeScheduler runs PLACEMENT_GUARD_AGREEMENT_CASES
// scenarios (200 by default) from PLACEMENT_GUARD_AGREEMENT_SEED (1 by
// default). A disagreement prints the scenario's seed; rerun it alone with
// PLACEMENT_GUARD_AGREEMENT_SEED=<seed> PLACEMENT_GUARD_AGREEMENT_CASES=1.
func TestEngineAgreesWithKubeScheduler(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane; run without -short")
	}
	cases := envInt(t, "PLACEMENT_GUARD_AGREEMENT_CASES", 200)
	first := envInt(t, "PLACEMENT_GUARD_AGREEMENT_SEED", 1)

	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	recorder := startFilterRecorder(t)
	cluster, err := localcluster.Start(ctx, localcluster.Options{
		SchedulerExtenderURL: recorder.URL,
		// New nodes lose the not-ready taint at the next node monitor pass;
		// a pass a second keeps 200 scenarios quick.
		ControllerManagerArgs: []string{"--node-monitor-period=1s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Stop)

	var previous []string
	ran, agreed, schedulable := 0, 0, 0
	for k := range cases {
		ran++
		seed := int64(first + k)
		sc := generate(seed, fmt.Sprintf("s%04d", seed))
		previous = replaceNodes(ctx, t, cluster, previous, sc)
		ok, bound := runScenario(ctx, t, cluster, recorder, seed, sc)
		if ok {
			agreed++
		}
		if bound {
			schedulable++
		}
		if t.Failed() && !ok {
			t.Logf("cluster logs:\n%s", cluster.Logs(3000))
			break
		}
	}
	t.Logf("the engine agreed with kube-scheduler on %d of %d scenarios run (%d schedulable, %d not; %d replicas placed after the first; %d terminating pods decided beside)", agreed, ran, schedulable, ran-schedulable, replicasPlaced, leavingSeen)
	if agreed != cases {
		t.Fatalf("agreement %d/%d: every disagreement is a bug in the engine", agreed, cases)
	}

	// Then Deployments rolled out by the controller-manager, every pod of
	// the first revision and of the next one, placed step by step beside
	// the old pods it leaves terminating.
	rollouts := envInt(t, "PLACEMENT_GUARD_AGREEMENT_ROLLOUTS", 24)
	var tally rolloutTally
	for k := range rollouts {
		seed := int64(first + k)
		sc := generate(seed, fmt.Sprintf("r%04d", seed))
		previous = replaceNodes(ctx, t, cluster, previous, sc)
		if !runRollout(ctx, t, cluster, recorder, seed, sc, &tally) {
			t.Logf("cluster logs:\n%s", cluster.Logs(3000))
			t.Fatalf("seed %d: a rollout's step disagreed; rerun it alone with PLACEMENT_GUARD_AGREEMENT_SEED=%d PLACEMENT_GUARD_AGREEMENT_CASES=0 PLACEMENT_GUARD_AGREEMENT_ROLLOUTS=1", seed, seed)
		}
	}
	t.Logf("%d Deployments rolled out: %d steps agreed, %d of them beside the Deployment's terminating pods, %d left Pending as the engine said", tally.rollouts, tally.steps, tally.beside, tally.pending)
	if rollouts >= 8 && tally.beside == 0 {
		t.Fatal("no rollout's pod was placed beside its old terminating pods: the rollouts went unchecked")
	}
	if cases >= 20 && leavingSeen == 0 {
		t.Fatal("no pod was decided beside terminating pods: the scheduler's view of them went unchecked")
	}
	if cases >= 20 && replicasPlaced == 0 {
		t.Fatal("no replica was placed after a scenario's first pod: the sequences went unchecked")
	}
	if cases >= 20 && (schedulable == 0 || schedulable == cases) {
		t.Fatalf("the generator must produce both schedulable and unschedulable pods (%d of %d schedulable)", schedulable, cases)
	}
}

// runScenario creates the scenario, lets the scheduler decide the pending
// pod and compares the engine's verdict with it.
func runScenario(ctx context.Context, t *testing.T, c *localcluster.Cluster, rec *filterRecorder, seed int64, sc scenario) (agreed, bound bool) {
	t.Helper()
	cs := c.Clientset
	defer createScenario(ctx, t, c, seed, sc)()
	// The scheduler's pod informer delivers events in order, so once the
	// bound pods run, the pending pod is decided with all of them counted.
	waitExistingRunning(ctx, t, c, seed, sc.existing)
	defer release(t, c, sc.leaving)
	startLeaving(ctx, t, c, seed, sc.leaving)

	pending, err := cs.CoreV1().Pods(sc.pending.Namespace).Create(ctx, sc.pending, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("seed %d: create pending pod: %v", seed, err)
	}
	// An unschedulable pod stays in the scheduler's queue until it is gone,
	// and the next scenario's nodes would wake it: the scheduler could then
	// assume it onto one of them while deciding that scenario's pod. Delete
	// it and wait until it is gone before the next scenario starts.
	defer deletePodAndWait(t, c, pending)
	var decided *corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(pending.Namespace).Get(ctx, pending.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Spec.NodeName != "" {
			decided = p
			return true, nil
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Reason == corev1.PodReasonUnschedulable {
				decided = p
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("seed %d: the scheduler did not decide the pending pod: %v", seed, err)
	}

	verdict, landing := engineVerdict(ctx, t, c, seed, pending)
	if decided.Spec.NodeName != "" {
		allowed, _ := rec.nodesFor(pending.UID)
		if !verdict.Schedulable || !slices.Equal(verdict.Nodes, allowed) || !slices.Contains(verdict.Nodes, decided.Spec.NodeName) {
			t.Errorf("seed %d: kube-scheduler allowed %v and bound to %s; the engine allows %v (%s)", seed, allowed, decided.Spec.NodeName, verdict.Nodes, verdict.Message)
			return false, true
		}
		// Where it landed is one of the nodes the engine scores best.
		if !slices.Contains(landing.Best, decided.Spec.NodeName) {
			t.Errorf("seed %d: kube-scheduler bound to %s; the engine's best-scored nodes are %v (ranking %+v)", seed, decided.Spec.NodeName, landing.Best, landing.Ranking)
			return false, true
		}
		// Then, in half of the scenarios, more replicas one after another
		// as a scale-up makes them: each lands where the engine, seeing
		// the ones before it bound, scores best.
		if seed%2 == 0 && !placeReplicas(ctx, t, c, seed, sc.pending, 2) {
			return false, true
		}
		return true, true
	}
	want := schedulerMessage(decided)
	if verdict.Schedulable || verdict.Message != want {
		t.Errorf("seed %d: kube-scheduler says %q; the engine allows %v and says %q", seed, want, verdict.Nodes, verdict.Message)
		return false, false
	}
	return true, false
}

// placeReplicas creates n copies of the pending pod (as generated: the API
// server merged its matchLabelKeys into the created one) one after another and
// checks that kube-scheduler binds each to a node of the engine's best
// set, asked just before the copy is created.
func placeReplicas(ctx context.Context, t *testing.T, c *localcluster.Cluster, seed int64, pending *corev1.Pod, n int) bool {
	t.Helper()
	for k := range n {
		replica := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pending.Namespace, Name: fmt.Sprintf("%s-%d", pending.Name, k+1),
			Labels: pending.Labels}, Spec: *pending.Spec.DeepCopy()}
		replica.Spec.NodeName = ""
		_, landing := engineVerdict(ctx, t, c, seed, replica)
		created, err := c.Clientset.CoreV1().Pods(replica.Namespace).Create(ctx, replica, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("seed %d: create replica %d: %v", seed, k+1, err)
		}
		defer deletePodAndWait(t, c, created)
		var bound string
		err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			p, err := c.Clientset.CoreV1().Pods(created.Namespace).Get(ctx, created.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodScheduled && cond.Reason == corev1.PodReasonUnschedulable {
					return true, nil
				}
			}
			bound = p.Spec.NodeName
			return bound != "", nil
		})
		if err != nil {
			t.Fatalf("seed %d: the scheduler did not decide replica %d: %v", seed, k+1, err)
		}
		if bound == "" {
			if len(landing.Best) > 0 {
				t.Errorf("seed %d: replica %d stayed Pending; the engine placed it on %v", seed, k+1, landing.Best)
				return false
			}
			return true
		}
		replicasPlaced++
		if !slices.Contains(landing.Best, bound) {
			t.Errorf("seed %d: kube-scheduler bound replica %d to %s; the engine's best-scored nodes are %v (ranking %+v)", seed, k+1, bound, landing.Best, landing.Ranking)
			return false
		}
		// The scheduler's cache counts the replica once it is bound; the
		// engine's next snapshot lists it from the API server.
	}
	return true
}

func deletePodAndWait(t *testing.T, c *localcluster.Cluster, p *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	pods := c.Clientset.CoreV1().Pods(p.Namespace)
	if err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptrTo[int64](0)}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete pod %s/%s: %v", p.Namespace, p.Name, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s was not deleted: %v", p.Namespace, p.Name, err)
	}
}

// schedulerMessage is the FailedScheduling message without the preemption
// part, which the engine does not model (no pod here can preempt another).
func schedulerMessage(p *corev1.Pod) string {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled {
			msg, _, _ := strings.Cut(cond.Message, " preemption:")
			return msg
		}
	}
	return ""
}

// engineVerdict asks the engine about the pending pod, on a snapshot of the
// cluster as the API server has it now, without the pending pod itself:
// where it may go, and where it lands.
func engineVerdict(ctx context.Context, t *testing.T, c *localcluster.Cluster, seed int64, pending *corev1.Pod) (placement.Verdict, placement.Landing) {
	t.Helper()
	cs := c.Clientset
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	namespaces, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A Deployment's pods spread by their ReplicaSet under the
	// scheduler's system default constraints.
	sets, err := cs.AppsV1().ReplicaSets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var objs placement.Objects
	for i := range nodes.Items {
		objs.Nodes = append(objs.Nodes, &nodes.Items[i])
	}
	for i := range pods.Items {
		if pods.Items[i].UID != pending.UID {
			objs.Pods = append(objs.Pods, &pods.Items[i])
		}
	}
	for i := range namespaces.Items {
		objs.Namespaces = append(objs.Namespaces, &namespaces.Items[i])
	}
	for i := range sets.Items {
		objs.ReplicaSets = append(objs.ReplicaSets, &sets.Items[i])
	}
	s, err := placement.NewSnapshot(objs)
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	v, err := s.Schedule(pending)
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	l, err := s.Land(pending)
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	return v, l
}

// createScenario creates the scenario's namespaces, nodes and existing
// pods, and returns what deletes the namespaces again.
func createScenario(ctx context.Context, t *testing.T, c *localcluster.Cluster, seed int64, sc scenario) (deleteNamespaces func()) {
	t.Helper()
	cs := c.Clientset
	for _, ns := range sc.namespaces {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
	deleteNamespaces = func() {
		for _, ns := range sc.namespaces {
			_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{GracePeriodSeconds: ptrTo[int64](0)})
		}
	}
	addNodes(ctx, t, c, seed, sc.nodes)
	for _, p := range sc.existing {
		if _, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			deleteNamespaces()
			t.Fatalf("seed %d: create %s: %v", seed, p.Name, err)
		}
	}
	return deleteNamespaces
}

// replaceNodes removes the previous scenario's nodes, and returns the
// names of the next one's, which it removes in turn.
func replaceNodes(ctx context.Context, t *testing.T, c *localcluster.Cluster, previous []string, next scenario) []string {
	t.Helper()
	removeNodes(ctx, t, c, previous)
	names := make([]string, len(next.nodes))
	for i, n := range next.nodes {
		names[i] = n.Name
	}
	return names
}

func addNodes(ctx context.Context, t *testing.T, c *localcluster.Cluster, seed int64, nodes []localcluster.Node) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, n := range nodes {
		wg.Go(func() {
			_, errs[i] = c.AddNode(ctx, n)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

func removeNodes(ctx context.Context, t *testing.T, c *localcluster.Cluster, names []string) {
	t.Helper()
	for _, n := range names {
		if err := c.RemoveNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	// The scheduler must not count them any more: wait until the API server
	// no longer lists them, then give its informer the same stream position
	// by waiting for one more object to go through it (the next scenario's
	// nodes take a second to become Ready, which is ample).
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := c.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, n := range list.Items {
			if slices.Contains(names, n.Name) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func waitExistingRunning(ctx context.Context, t *testing.T, c *localcluster.Cluster, seed int64, pods []*corev1.Pod) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, p := range pods {
			got, err := c.Clientset.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if got.Status.Phase != corev1.PodRunning {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("seed %d: bound pods did not start: %v", seed, err)
	}
}

// startLeaving deletes the leaving pods, which their finalizer keeps
// terminating, and waits until the API server says so of each.
func startLeaving(ctx context.Context, t *testing.T, c *localcluster.Cluster, seed int64, pods []*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		if err := c.Clientset.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptrTo[int64](30)}); err != nil {
			t.Fatalf("seed %d: delete %s: %v", seed, p.Name, err)
		}
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, p := range pods {
			got, err := c.Clientset.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if got.DeletionTimestamp == nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("seed %d: the leaving pods are not terminating: %v", seed, err)
	}
	leavingSeen += len(pods)
}

// leavingSeen counts the terminating pods the scenarios decided beside.
var leavingSeen int

// release takes the finalizer off the leaving pods, so that they go and
// their namespace with them.
func release(t *testing.T, c *localcluster.Cluster, pods []*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		if _, err := c.Clientset.CoreV1().Pods(p.Namespace).Patch(context.Background(), p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("release %s/%s: %v", p.Namespace, p.Name, err)
		}
	}
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

func ptrTo[T any](v T) *T { return &v }

// replicasPlaced counts the replicas placeReplicas saw bound.
var replicasPlaced int
