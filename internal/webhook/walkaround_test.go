package webhook

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	pgadmission "github.com/placement-guard/placement-guard/internal/admission"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/targets"
)

// pools is a cluster of two pools, a of three nodes and b of two, and
// rates: three replicas kept apart per node, running on pool a.
type pools struct {
	snap     *placement.Snapshot
	workload client.Object
}

func newPools(t *testing.T) *pools {
	t.Helper()
	node := func(name, pool string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name, "pool": pool}}, Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	}
	objs := placement.Objects{Nodes: []*corev1.Node{node("a1", "a"), node("a2", "a"), node("a3", "a"), node("b1", "b"), node("b2", "b")}}
	spec := rates(3, "a").Spec.Template.Spec
	for _, n := range []string{"a1", "a2", "a3"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "rates-" + n, UID: k8stypes.UID("uid-rates-" + n), Labels: map[string]string{"app": "rates"}},
			Spec: *spec.DeepCopy(), Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
		pod.Spec.NodeName = n
		objs.Pods = append(objs.Pods, pod)
	}
	snap, err := placement.NewSnapshot(objs)
	if err != nil {
		t.Fatal(err)
	}
	return &pools{snap: snap, workload: rates(3, "a")}
}

// rates is the Deployment with n replicas on pool.
func rates(n int32, pool string) *appsv1.Deployment {
	labels := map[string]string{"app": "rates"}
	return &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "rates", UID: "d-rates"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(n), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				Containers:   []corev1.Container{{Name: "c", Image: "x:1"}},
				NodeSelector: map[string]string{"pool": pool},
				Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}}}},
			}}}}
}

func (c *pools) With(ctx context.Context, f func(*placement.Snapshot) error) error {
	return c.snap.Within(ctx, f)
}

func (c *pools) Live(_ context.Context, obj client.Object) (*targets.Target, error) {
	t := targets.Build(obj, nil, nil)
	t.Workload.Pods, t.Workload.Revision = []k8stypes.UID{"uid-rates-a1", "uid-rates-a2", "uid-rates-a3"}, "old"
	return t, nil
}

func (c *pools) Migrations(context.Context, string) ([]pgv1.PlacementMigration, error) {
	return nil, nil
}

func (c *pools) Workload(context.Context, *targets.Kind, string, string) (client.Object, error) {
	return c.workload.DeepCopyObject().(client.Object), nil
}

// Deny cannot be walked around by scaling first: a workload moved where
// fewer of its pods fit is refused, whether it was satisfiable before or
// scaled past what any pool holds; only an autoscaler's scale is
// admitted, and the way back (fewer replicas) always is.
func TestDenyCannotBeWalkedAroundByScalingFirst(t *testing.T) {
	ctx := context.Background()
	v, _ := validator(t, "Deny", pgadmission.ModeWarn)
	cluster := newPools(t)
	v.Cluster = cluster
	update := func(old, new *appsv1.Deployment) admission.Response {
		req := request(t, admissionv1.Update, old, new, "kubectl")
		req.Name = "rates"
		return v.Handle(ctx, asUser(req, "tenant"))
	}
	scale := func(user string, from, to int32) admission.Response {
		req := asUser(scaleRequest(t, from, to), user)
		req.Name = "rates"
		return v.Handle(ctx, req)
	}
	if resp := update(rates(3, "a"), rates(3, "b")); resp.Allowed {
		t.Fatalf("three apart moved to a pool of two: admitted %+v", resp)
	}
	if resp := scale("tenant", 3, 50); resp.Allowed {
		t.Fatalf("a person's scale to fifty apart on three nodes: admitted %+v", resp)
	}
	if resp := scale("system:kube-controller-manager", 3, 50); !resp.Allowed || !strings.Contains(strings.Join(resp.Warnings, " "), "InsufficientCapacity") {
		t.Fatalf("an autoscaler's scale: want admitted with its findings, got %+v", resp)
	}
	cluster.workload = rates(50, "a")
	resp := update(rates(50, "a"), rates(50, "b"))
	if resp.Allowed {
		t.Fatalf("fifty apart moved from three nodes to two, after the scale: admitted %+v", resp)
	}
	if !strings.Contains(resp.Result.Message, "InsufficientCapacity") {
		t.Fatalf("the refusal names the finding: %q", resp.Result.Message)
	}
	if resp := update(rates(50, "a"), rates(3, "a")); !resp.Allowed {
		t.Fatalf("the way back, three replicas: refused %+v", resp)
	}
}
