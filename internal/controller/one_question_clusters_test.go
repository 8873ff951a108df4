package controller

import (
	"fmt"
	"math/rand/v2"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/planning"
)

// The clusters the one-question specs generate, each in a namespace of
// its own, with the migration the operator and plan are asked about.

// generatedCluster is one namespace's cluster and its dry-run migration.
type generatedCluster struct {
	fc *fakeCluster
	// name is the dry-run migration's.
	name  string
	shape string
	// migrate creates the migrations. They are created once every
	// cluster exists: the scheduler's messages in the verdicts count the
	// nodes of the whole cluster, which must not change between the
	// operator's verdicts and the snapshot plan reads.
	migrate func()
	// nodes and replicas are the cluster's node names and the target's
	// replicas: a rollout of the Soft stage lands them anew.
	nodes    []string
	replicas int
}

// toHard makes generated migrations apply their stages: final stage
// Hard, the pre-flight's guard Block or Warn, a soak the spec ends by
// moving the clock on, so that the decision before the Hard stage is
// taken on a cluster read while the Soft stage soaks. (Protected pods
// stop the Soft stage, which recreates them first; the first spec
// compares that decision.)
type toHard bool

// generateCluster builds, in a namespace of its own, 1-5 nodes over 1-3
// zones, a Deployment of 1-6 replicas on random nodes with a random
// rolling update, sometimes a PodDisruptionBudget, and a dry-run
// migration of a random constraint: hostname or zone anti-affinity, or a
// zone or hostname spread of maxSkew 1-2, final stage Soft or Hard.
func generateCluster(rng *rand.Rand, hard toHard) generatedCluster {
	fc := newFakeCluster()
	nodes := 1 + rng.IntN(5)
	zones := 1 + rng.IntN(3)
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i)
		fc.node(names[i], map[string]string{corev1.LabelTopologyZone: fmt.Sprintf("z%d", i%zones)})
	}
	// As many replicas as nodes half the time: the shape of seed 001.
	replicas := int32(nodes)
	switch {
	case bool(hard):
		// No more replicas than nodes, so that most reach the Hard
		// stage.
		replicas = int32(1 + rng.IntN(nodes))
	case rng.IntN(2) == 0:
		replicas = int32(1 + rng.IntN(6))
	}
	surge, unavailable := []intstr.IntOrString{intstr.FromInt32(1), intstr.FromInt32(0), intstr.FromString("25%")}[rng.IntN(3)],
		[]intstr.IntOrString{intstr.FromInt32(0), intstr.FromInt32(1), intstr.FromString("25%")}[rng.IntN(3)]
	if surge.IntVal == 0 && surge.Type == intstr.Int && unavailable.IntVal == 0 && unavailable.Type == intstr.Int {
		unavailable = intstr.FromInt32(1)
	}
	fc.deployment("app", replicas, func(d *appsv1.Deployment) {
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable}}
	})
	placed := make([]string, replicas)
	for i := range placed {
		placed[i] = names[rng.IntN(nodes)]
	}
	fc.rollOut("app", placed...)
	if rng.IntN(5) == 0 {
		// A canary whose pods the constraint's selector (app=app) counts
		// too: the shape of seed 002.
		fc.deployment("canary", 1, func(d *appsv1.Deployment) {
			d.Spec.Selector.MatchLabels = map[string]string{"app": "app", "track": "canary"}
			d.Spec.Template.Labels = map[string]string{"app": "app", "track": "canary"}
		})
		fc.rollOut("canary", names[rng.IntN(nodes)])
	}
	if rng.IntN(4) == 0 || (bool(hard) && rng.IntN(3) == 0) {
		Expect(k8sClient.Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: fc.ns, Name: "app"},
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(int32(rng.IntN(2)))),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "app"}}}})).To(Succeed())
	}
	outside := ""
	if !hard {
		outside = stopOutside(fc, rng, int(replicas))
	}
	key := []string{hostnameKey, corev1.LabelTopologyZone}[rng.IntN(2)]
	var c pgv1.Constraint
	if rng.IntN(2) == 0 {
		c = pgv1.Constraint{PodAntiAffinity: &pgv1.PodAntiAffinityConstraint{TopologyKey: key}}
	} else {
		c = pgv1.Constraint{TopologySpread: &pgv1.TopologySpreadConstraint{TopologyKey: key, MaxSkew: int32(1 + rng.IntN(2))}}
	}
	final := []pgv1.Stage{pgv1.StageSoft, pgv1.StageHard}[rng.IntN(2)]
	if hard {
		final = pgv1.StageHard
	}
	others, migrate := "", func() {}
	if rng.IntN(6) == 0 {
		// An older, paused migration of the same target: with the same
		// constraint it is judged with, over another key it holds the
		// field.
		first := *c.DeepCopy()
		if rng.IntN(2) == 0 {
			others = ", an older migration of the same constraint"
		} else {
			others = ", an older migration of the field over another key"
			other := map[string]string{hostnameKey: corev1.LabelTopologyZone, corev1.LabelTopologyZone: hostnameKey}[key]
			if first.PodAntiAffinity != nil {
				first.PodAntiAffinity.TopologyKey = other
			} else {
				first.TopologySpread.TopologyKey = other
			}
		}
		migrate = func() {
			fc.migration("a-first", pgv1.PlacementMigrationSpec{Targets: targetsNamed("app"), Constraint: first, Paused: true})
		}
	}
	var guards *pgv1.Guards
	if hard {
		guards = &pgv1.Guards{Disruptions: []pgv1.DisruptionPolicy{pgv1.DisruptionBlock, pgv1.DisruptionWarn}[rng.IntN(2)]}
		others += ", disruptions " + string(guards.Disruptions)
	} else if rng.IntN(4) == 0 {
		// The targets' own pods protected: any stage that recreates them
		// is refused, by the operator and by plan.
		guards = &pgv1.Guards{ProtectedPods: pgv1.Labels(map[string]string{"app": "app"})}
		others += ", its own pods protected"
	}
	var capacity *pgv1.Capacity
	if rng.IntN(4) == 0 {
		// A request for the nodes that clear a deadlock turns Blocked
		// into a wait for capacity.
		capacity = &pgv1.Capacity{Provision: &pgv1.Provision{Mode: pgv1.ProvisionPlaceholderPods, MaxNodes: ptr.To[int32](1)}}
		others += ", placeholder pods asked for"
	}
	spec := pgv1.PlacementMigrationSpec{Targets: targetsNamed("app"), Constraint: c, FinalStage: final, DryRun: !bool(hard),
		Guards: guards, Capacity: capacity}
	if hard {
		spec.SoakDuration = &metav1.Duration{Duration: time.Minute}
	}
	return generatedCluster{fc: fc, name: "guard", nodes: names, replicas: int(replicas), migrate: func() {
		migrate()
		fc.migration("guard", spec)
	}, shape: fmt.Sprintf("%d nodes in %d zones, %d replicas on %v, surge %s unavailable %s, %s, final %s%s%s",
		nodes, zones, replicas, placed, surge.String(), unavailable.String(), describeConstraint(c), final, others, outside)}
}

// stopOutside gives one cluster in ten a cause outside the migration that
// the operator and plan must both stop at, each observing it from what
// it reads: a target pod Pending for an hour for a reason the constraint
// does not make, the target's own rollout given up, or its controller
// refused a pod by a quota for an hour (a view of the pods that stays
// short beyond the stage timeout). It says which, for the shape.
func stopOutside(fc *fakeCluster, rng *rand.Rand, replicas int) string {
	hourAgo := metav1.NewTime(testClock.Now().Add(-time.Hour).Truncate(time.Second))
	switch rng.IntN(30) {
	case 0:
		fc.pod(fc.replicaSet(fc.get("app")), "", func(p *corev1.Pod) {
			unschedulableWith("0/5 nodes are available: 5 Insufficient example.com/gpu.")(p)
			p.Status.Conditions[0].LastTransitionTime = hourAgo
		})
		return ", a pod Pending for an hour"
	case 1:
		d := fc.get("app")
		d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
			Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "app-g1" has timed out progressing.`, LastTransitionTime: hourAgo, LastUpdateTime: hourAgo}}
		Expect(k8sClient.Status().Update(ctx, d)).To(Succeed())
		return ", its own rollout given up"
	case 2:
		d := fc.get("app")
		d.Spec.Replicas = ptr.To(int32(replicas + 1))
		Expect(k8sClient.Update(ctx, d)).To(Succeed())
		d = fc.get("app")
		n := int32(replicas)
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate",
				Message: `pods "app-g1-x2" is forbidden: exceeded quota: pods`, LastTransitionTime: hourAgo, LastUpdateTime: hourAgo}}}
		Expect(k8sClient.Status().Update(ctx, d)).To(Succeed())
		return ", a pod refused by a quota for an hour"
	}
	return ""
}

// tooManyTargets is a namespace whose migration selects one workload more
// than a status records: both stop before anything else.
func tooManyTargets() generatedCluster {
	fc := newFakeCluster()
	fc.node("n0", nil)
	for i := range planning.MaxTargets + 1 {
		fc.deployment(fmt.Sprintf("w%02d", i), 0, func(d *appsv1.Deployment) { d.Labels["tier"] = "web" })
	}
	spec := pgv1.PlacementMigrationSpec{TargetSelector: &pgv1.TargetSelector{Selector: pgv1.LabelSelector{MatchLabels: map[string]pgv1.LabelValue{"tier": "web"}}},
		Constraint: hostnameAntiAffinity(nil), DryRun: true}
	return generatedCluster{fc: fc, name: "guard", shape: fmt.Sprintf("%d workloads selected", planning.MaxTargets+1),
		migrate: func() { fc.migration("guard", spec) }}
}

func describeConstraint(c pgv1.Constraint) string {
	if c.PodAntiAffinity != nil {
		return "anti-affinity over " + c.PodAntiAffinity.TopologyKey
	}
	return fmt.Sprintf("spread over %s maxSkew %d", c.TopologySpread.TopologyKey, c.TopologySpread.MaxSkew)
}
