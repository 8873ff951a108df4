package policies

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/workloadpatch"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// operatorUser is the ServiceAccount config/default deploys the manager as,
// which config/policies/operator-writes-placement-only.yaml names.
const operatorUser = "system:serviceaccount:placement-guard-system:placement-guard-controller-manager"

const refusedPrefix = "placement-guard may not"

// TestOperatorWritesPlacementOnly impersonates the operator's ServiceAccount
// and sends what the operator sends (its own server-side apply of a
// migration's entry), then what it must never send.
func TestOperatorWritesPlacementOnly(t *testing.T) {
	cfg, scheme, stop := startWithPolicy(t, "operator-writes-placement-only.yaml")
	defer stop()
	ctx := context.Background()
	admin := mustClient(t, cfg, scheme, "")

	// RBAC lets the operator patch any field of a workload, as the
	// manager's ClusterRole does.
	must(t, admin.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "operator-workloads"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}}))
	bind(t, admin, operatorUser, "operator-workloads")
	operator := mustClient(t, cfg, scheme, operatorUser)

	web := deployment("web")
	must(t, admin.Create(ctx, web))
	db := statefulSet("db")
	must(t, admin.Create(ctx, db))

	// The API server loads a new policy asynchronously: wait until it
	// refuses the operator an image change.
	setImage := func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "registry.example.com/web:2" }
	var refusal error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if refusal = updateDeployment(ctx, operator, "web", setImage); refusal != nil {
			break
		}
		must(t, updateDeployment(ctx, admin, "web", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "registry.example.com/web:1" }))
	}
	wantRefused(t, refusal, "placement-guard may not change Deployment web spec.template.spec.containers")
	// Installed in another namespace, the operator's ServiceAccount is held
	// all the same: the policy names the account, not the namespace, which
	// a kustomization's namespace would never reach.
	elsewhere := "system:serviceaccount:platform-ops:placement-guard-controller-manager"
	bind(t, admin, elsewhere, "operator-workloads")
	wantRefused(t, updateDeployment(ctx, mustClient(t, cfg, scheme, elsewhere), "web", setImage),
		"placement-guard may not change Deployment web spec.template.spec.containers")

	hostname := placement.Constraint{AntiAffinity: &placement.AntiAffinity{TopologyKey: corev1.LabelHostname}}
	zones := placement.Constraint{Spread: &placement.Spread{TopologyKey: corev1.LabelTopologyZone, MaxSkew: 1}}
	for _, c := range []struct {
		name       string
		target     workloadpatch.Target
		constraint placement.Constraint
		stage      pgv1.Stage
	}{
		{"soft anti-affinity on a Deployment", workloadpatch.Target{Kind: pgv1.KindDeployment, Namespace: ns, Name: "web"}, hostname, pgv1.StageSoft},
		{"hard anti-affinity on a Deployment", workloadpatch.Target{Kind: pgv1.KindDeployment, Namespace: ns, Name: "web"}, hostname, pgv1.StageHard},
		{"hard spread on a StatefulSet", workloadpatch.Target{Kind: pgv1.KindStatefulSet, Namespace: ns, Name: "db"}, zones, pgv1.StageHard},
		{"a revert", workloadpatch.Target{Kind: pgv1.KindDeployment, Namespace: ns, Name: "web"}, hostname, pgv1.StageNone},
	} {
		entry, err := c.constraint.Entry(&metav1.LabelSelector{MatchLabels: map[string]string{"app": c.target.Name}}, c.stage)
		must(t, err)
		ac, err := workloadpatch.ApplyConfiguration(c.target, entry)
		must(t, err)
		if err := operator.Apply(ctx, ac, client.FieldOwner(workloadpatch.FieldManager("m")), client.ForceOwnership); err != nil {
			t.Errorf("%s, as the operator writes it, must be admitted: %v", c.name, err)
		}
	}

	for _, c := range []struct {
		name   string
		change func(*appsv1.Deployment)
		want   string
	}{
		{"replicas", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](5) }, "may not change Deployment web spec.replicas"},
		{"strategy", func(d *appsv1.Deployment) {
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
		}, "spec.strategy"},
		{"node selector", func(d *appsv1.Deployment) { d.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "x"} }, "spec.template.spec.nodeSelector"},
		{"tolerations", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}, "spec.template.spec.tolerations"},
		{"node affinity", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpExists}}}}}}}
		}, "node affinity or pod affinity"},
		{"pod template labels", func(d *appsv1.Deployment) { d.Spec.Template.Labels["extra"] = "x" }, "pod template metadata"},
		{"workload labels", func(d *appsv1.Deployment) { d.Labels = map[string]string{"extra": "x"} }, "labels, annotations, owners or finalizers"},
		{"an annotation of another's", func(d *appsv1.Deployment) { d.Annotations = map[string]string{"team": "x"} }, "labels, annotations, owners or finalizers"},
		{"Adopt mode's records where there were none", func(d *appsv1.Deployment) {
			d.Annotations = map[string]string{"placementguard.io/adopted": `[{"migration":"m","term":{"topologyKey":"x"}}]`}
		}, "labels, annotations, owners or finalizers"},
	} {
		wantRefused(t, updateDeployment(ctx, operator, "web", c.change), c.want)
	}

	// Adopt mode's records the workload carries (a change's author's write
	// left them) the operator may mark, and nothing else beside them.
	must(t, updateDeployment(ctx, admin, "web", func(d *appsv1.Deployment) {
		d.Annotations = map[string]string{"placementguard.io/adopted": `[{"migration":"m","term":{"topologyKey":"x"}}]`, "team": "a"}
	}))
	if err := updateDeployment(ctx, operator, "web", func(d *appsv1.Deployment) {
		d.Annotations["placementguard.io/adopted"] = `[{"migration":"m","term":{"topologyKey":"x"},"ended":"aborted"}]`
	}); err != nil {
		t.Errorf("the operator marks the records a workload carries: %v", err)
	}
	wantRefused(t, updateDeployment(ctx, operator, "web", func(d *appsv1.Deployment) {
		d.Annotations["placementguard.io/adopted"] = `[]`
		d.Annotations["team"] = "b"
	}), "labels, annotations, owners or finalizers")
	wantRefused(t, updateDeployment(ctx, operator, "web", func(d *appsv1.Deployment) { delete(d.Annotations, "team") }),
		"labels, annotations, owners or finalizers")
	partition := func(s *appsv1.StatefulSet) {
		s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](1)}
	}
	current := &appsv1.StatefulSet{}
	must(t, operator.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, current))
	partition(current)
	wantRefused(t, operator.Update(ctx, current), "may not change StatefulSet db spec.updateStrategy")
	wantRefused(t, operator.Create(ctx, deployment("new")), "placement-guard may not create a Deployment")
	wantRefused(t, operator.Delete(ctx, deployment("web")), "placement-guard may not delete a Deployment")

	// Everyone else is left alone.
	if err := updateDeployment(ctx, admin, "web", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](5) }); err != nil {
		t.Errorf("the policy must not bind users other than the operator: %v", err)
	}
}

func wantRefused(t *testing.T, err error, message string) {
	t.Helper()
	if err == nil {
		t.Errorf("want refused with %q, was admitted", message)
		return
	}
	if !strings.Contains(err.Error(), refusedPrefix) || !strings.Contains(err.Error(), message) {
		t.Errorf("want refused with %q, got: %v", message, err)
	}
}

func updateDeployment(ctx context.Context, c client.Client, name string, change func(*appsv1.Deployment)) error {
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		return err
	}
	change(d)
	return c.Update(ctx, d)
}

func podTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: app, Image: "registry.example.com/" + app + ":1"}}},
	}
}

func deployment(name string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](2),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
		Template: podTemplate(name),
	}}
}

func statefulSet(name string) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr.To[int32](2),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
		Template: podTemplate(name),
	}}
}
