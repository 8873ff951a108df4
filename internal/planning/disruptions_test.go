package planning

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
)

// apartCluster is a Deployment "api" whose pods keep apart per key
// (required anti-affinity), one pod on each of the first `replicas` of
// `nodes` nodes, each node in zone z<i%zones>.
func apartCluster(t *testing.T, key string, nodes, replicas, zones int) (*placement.Snapshot, []*Target) {
	t.Helper()
	return apiCluster(t, corev1.PodSpec{Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}}}}}}, nodes, replicas, zones)
}

// apiCluster is a Deployment "api" of pod spec spec (its container added),
// one pod on each of the first `replicas` of `nodes` nodes, each node in
// zone z<i%zones>.
func apiCluster(t *testing.T, spec corev1.PodSpec, nodes, replicas, zones int) (*placement.Snapshot, []*Target) {
	t.Helper()
	labels := map[string]string{"app": "api"}
	spec.Containers = []corev1.Container{{Name: "api", Image: "api:1"}}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "payments", Name: "api", UID: "d-api"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(replicas)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}},
	}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "payments", Name: "api-1", UID: "rs-api",
		Labels:          map[string]string{"app": "api", appsv1.DefaultDeploymentUniqueLabelKey: "1"},
		OwnerReferences: []metav1.OwnerReference{{Kind: "Deployment", Name: "api", UID: d.UID, Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Template: d.Spec.Template}}
	var objs placement.Objects
	for i := range nodes {
		name := fmt.Sprintf("node-%d", i)
		objs.Nodes = append(objs.Nodes, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name, corev1.LabelTopologyZone: fmt.Sprintf("z%d", i%zones)}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
		})
	}
	var pods []*corev1.Pod
	for i := range replicas {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "payments", Name: fmt.Sprintf("api-1-%d", i), UID: types.UID(fmt.Sprintf("pod-%d", i)),
			Labels:          rs.Labels,
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}},
			Spec: *d.Spec.Template.Spec.DeepCopy()}
		p.Spec.NodeName = fmt.Sprintf("node-%d", i)
		p.Status.Phase = corev1.PodRunning
		pods = append(pods, p)
	}
	objs.Pods = pods
	snap, err := placement.NewSnapshot(objs)
	if err != nil {
		t.Fatal(err)
	}
	found, missing := Resolve([]pgv1.TargetRef{{Kind: pgv1.KindDeployment, Name: "api"}},
		Inventory{Workloads: []client.Object{d}, ReplicaSets: []*appsv1.ReplicaSet{rs}, Pods: pods}, placement.Constraint{})
	if len(missing) > 0 {
		t.Fatalf("missing %v", missing)
	}
	return snap, found
}

// What a target under its constraint must survive, judged on the cluster
// as it runs: the first disruption it does not survive is the verdict,
// with its fix.
func TestDisruptionsNameTheFirstOneATargetDoesNotSurvive(t *testing.T) {
	spec := &pgv1.PlacementMigrationSpec{Constraint: pgv1.Constraint{PodAntiAffinity: &pgv1.PodAntiAffinityConstraint{TopologyKey: corev1.LabelHostname}}}
	zoneSpec := &pgv1.PlacementMigrationSpec{Constraint: pgv1.Constraint{PodAntiAffinity: &pgv1.PodAntiAffinityConstraint{TopologyKey: corev1.LabelTopologyZone}}}
	budget := func(maxUnavailable int32) policyv1.PodDisruptionBudget {
		return policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "api"}, Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(maxUnavailable)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}}}
	}
	autoscaler := func(maxReplicas int32) autoscalingv2.HorizontalPodAutoscaler {
		return autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "api"}, Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: "Deployment", Name: "api"}, MaxReplicas: maxReplicas}}
	}
	cases := []struct {
		name                   string
		spec                   *pgv1.PlacementMigrationSpec
		nodes, replicas, zones int
		policies               Policies
		reason                 string
		says                   string
	}{
		{"a spare node takes any drained pod", spec, 4, 3, 1, Policies{}, pgv1.ReasonDisruptionsTolerated, "a drain of any node it runs on places the evicted pods elsewhere"},
		{"replicas == nodes: a drain strands a pod (seed 001 after the rollout)", spec, 3, 3, 1, Policies{}, pgv1.ReasonEvictedPodUnplaceable, "add a qualifying node (N+1)"},
		{"a budget that forbids every eviction", spec, 4, 3, 1, Policies{Budgets: []policyv1.PodDisruptionBudget{budget(0)}}, pgv1.ReasonDrainBlockedByBudget, "has maxUnavailable 0"},
		{"a budget that allows one is fine", spec, 4, 3, 1, Policies{Budgets: []policyv1.PodDisruptionBudget{budget(1)}}, pgv1.ReasonDisruptionsTolerated, ""},
		{"an autoscaler beyond the nodes", spec, 4, 3, 1, Policies{Autoscalers: []autoscalingv2.HorizontalPodAutoscaler{autoscaler(6)}}, pgv1.ReasonScaleOutUnsatisfiable, "only 4 fit"},
		{"an autoscaler within them", spec, 5, 3, 1, Policies{Autoscalers: []autoscalingv2.HorizontalPodAutoscaler{autoscaler(4)}}, pgv1.ReasonDisruptionsTolerated, "and 4 replicas fit"},
		{"one pod per zone and a node spare in each: a drain is fine, the loss of a zone is not", zoneSpec, 6, 3, 3, Policies{}, pgv1.ReasonZoneLossUnplaceable, "add qualifying capacity in the other zones"},
		{"a fourth zone takes the lost zone's pod", zoneSpec, 8, 3, 4, Policies{}, pgv1.ReasonDisruptionsTolerated, "and the loss of any one topology.kubernetes.io/zone"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap, ts := apartCluster(t, tc.spec.Constraint.PodAntiAffinity.TopologyKey, tc.nodes, tc.replicas, tc.zones)
			v, err := Disruptions(snap, IntentOf(&pgv1.PlacementMigration{Spec: *tc.spec}), ts, tc.policies)
			if err != nil {
				t.Fatal(err)
			}
			if v.Reason != tc.reason || v.OK != (tc.reason == pgv1.ReasonDisruptionsTolerated) {
				t.Fatalf("verdict %+v, want %s", v, tc.reason)
			}
			if !strings.Contains(v.Message, tc.says) {
				t.Errorf("message %q does not say %q", v.Message, tc.says)
			}
		})
	}
}

func resourceQuantity(s string) resource.Quantity { return resource.MustParse(s) }
