package e2e

import (
	"context"
	"fmt"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/test/utils"
)

// migration creates a PlacementMigration without waiting: no minimum pod
// age, a short soak and the shortest stage timeout the API admits, so that
// only the behaviour under test sets the pace.
func migration(ctx context.Context, namespace, name string, spec pgv1.PlacementMigrationSpec) {
	if spec.StageTimeout == nil {
		spec.StageTimeout = &metav1.Duration{Duration: 5 * 60e9}
	}
	if spec.SoakDuration == nil {
		spec.SoakDuration = &metav1.Duration{Duration: 2e9}
	}
	if spec.Guards == nil {
		spec.Guards = &pgv1.Guards{}
	}
	if spec.Guards.MinPodAge == nil {
		spec.Guards.MinPodAge = &metav1.Duration{}
	}
	pm := &pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: spec}
	Expect(k8sClient.Create(ctx, pm)).To(Succeed())
}

func getMigration(ctx context.Context, namespace, name string) *pgv1.PlacementMigration {
	pm := &pgv1.PlacementMigration{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pm)).To(Succeed())
	return pm
}

// phaseOf is for Eventually: the phase once status describes the spec.
func phaseOf(ctx context.Context, namespace, name string) func() pgv1.Phase {
	return func() pgv1.Phase {
		pm := getMigration(ctx, namespace, name)
		if pm.Status.ObservedGeneration != pm.Generation {
			return ""
		}
		return pm.Status.Phase
	}
}

func conditionOf(ctx context.Context, namespace, name, conditionType string) metav1.Condition {
	if c := meta.FindStatusCondition(getMigration(ctx, namespace, name).Status.Conditions, conditionType); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// explain describes the migration and the namespace's pods for a failure.
func explain(ctx context.Context, namespace, name string) func() string {
	return func() string {
		pm := getMigration(ctx, namespace, name)
		out := fmt.Sprintf("phase %s (generation %d, observed %d)", pm.Status.Phase, pm.Generation, pm.Status.ObservedGeneration)
		for _, c := range pm.Status.Conditions {
			out += fmt.Sprintf("\n  %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
		}
		if pods, err := utils.PodsOf(ctx, k8sClient, namespace, nil); err == nil {
			out += "\n  pods: " + utils.Placement(pods)
		}
		return out + rollouts(ctx, namespace)
	}
}

// rollouts describes the namespace's Deployments as their controller
// reports them: a status that lags its generation is the controller
// manager's delay, not the operator's (whose progress message may be up
// to a minute old, statuspace.go).
func rollouts(ctx context.Context, namespace string) string {
	var list appsv1.DeploymentList
	if err := k8sClient.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return "\n  deployments: " + err.Error()
	}
	out := ""
	for _, d := range list.Items {
		out += fmt.Sprintf("\n  deployment %s: generation %d, observed %d, replicas %d, updated %d, available %d",
			d.Name, d.Generation, d.Status.ObservedGeneration, d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.AvailableReplicas)
	}
	return out
}

// incarnation identifies a pod's life: recreated pods differ in uid and
// creation time, restarted ones in restart count.
type incarnation struct {
	UID      types.UID
	Created  metav1.Time
	Restarts int32
	Node     string
}

func incarnations(ctx context.Context, namespace string, labels map[string]string) map[string]incarnation {
	pods, err := utils.PodsOf(ctx, k8sClient, namespace, labels)
	Expect(err).NotTo(HaveOccurred())
	out := map[string]incarnation{}
	for _, p := range pods {
		var restarts int32
		for _, s := range p.Status.ContainerStatuses {
			restarts += s.RestartCount
		}
		out[p.Name] = incarnation{UID: p.UID, Created: p.CreationTimestamp, Restarts: restarts, Node: p.Spec.NodeName}
	}
	return out
}

// allRunning waits for exactly n Running pods matching labels and returns them.
func allRunning(ctx context.Context, namespace string, labels map[string]string, n int) []corev1.Pod {
	var pods []corev1.Pod
	Eventually(func(g Gomega) {
		var err error
		pods, err = utils.PodsOf(ctx, k8sClient, namespace, labels)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods).To(HaveLen(n), utils.Placement(pods))
		for _, p := range pods {
			g.Expect(utils.Running(p)).To(BeTrue(), utils.Placement(pods))
		}
	}).Should(Succeed())
	return pods
}

func targetsNamed(names ...string) []pgv1.TargetRef {
	out := make([]pgv1.TargetRef, len(names))
	for i, n := range names {
		out[i] = pgv1.TargetRef{Kind: pgv1.KindDeployment, Name: n}
	}
	return out
}

func hostnameApart(selector map[string]string) pgv1.Constraint {
	c := pgv1.Constraint{PodAntiAffinity: &pgv1.PodAntiAffinityConstraint{TopologyKey: corev1.LabelHostname}}
	if selector != nil {
		c.PodAntiAffinity.LabelSelector = pgv1.Labels(selector)
	}
	return c
}
