package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	pgadmission "github.com/placement-guard/placement-guard/internal/admission"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/targets"
	"github.com/placement-guard/placement-guard/internal/workloadpatch"
)

// twoNodes is seed 001's cluster: web's two pods on two nodes.
type twoNodes struct {
	snap       *placement.Snapshot
	delay      time.Duration
	migrations []pgv1.PlacementMigration
	// workload is web as the cache holds it, for writes to its scale.
	workload client.Object
}

func newTwoNodes(t *testing.T) *twoNodes {
	t.Helper()
	node := func(name string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}, Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	}
	pod := func(name, nodeName string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: k8stypes.UID("uid-" + name), Labels: map[string]string{"app": "web"}},
			Spec:   corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Image: "x"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	}
	snap, err := placement.NewSnapshot(placement.Objects{Nodes: []*corev1.Node{node("n1"), node("n2")}, Pods: []*corev1.Pod{pod("web-a", "n1"), pod("web-b", "n2")}})
	if err != nil {
		t.Fatal(err)
	}
	return &twoNodes{snap: snap}
}

// With holds the snapshot for c.delay first, as a long judgement before
// this one would, and stops waiting when ctx ends, as the cluster
// state's lock does.
func (c *twoNodes) With(ctx context.Context, f func(*placement.Snapshot) error) error {
	select {
	case <-time.After(c.delay):
	case <-ctx.Done():
		return fmt.Errorf("%w: waiting for the snapshot: %w", placement.ErrInterrupted, ctx.Err())
	}
	return c.snap.Within(ctx, f)
}

func (c *twoNodes) Live(_ context.Context, obj client.Object) (*targets.Target, error) {
	t := targets.Build(obj, nil, nil)
	t.Workload.Pods, t.Workload.Revision = []k8stypes.UID{"uid-web-a", "uid-web-b"}, "old"
	return t, nil
}

func (c *twoNodes) Migrations(context.Context, string) ([]pgv1.PlacementMigration, error) {
	return c.migrations, nil
}

func (c *twoNodes) Workload(_ context.Context, _ *targets.Kind, _, name string) (client.Object, error) {
	if c.workload == nil || c.workload.GetName() != name {
		return nil, apierrors.NewNotFound(appsv1.Resource("deployments"), name)
	}
	return c.workload.DeepCopyObject().(client.Object), nil
}

func web(mutate ...func(*appsv1.Deployment)) *appsv1.Deployment {
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "d-web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x:1"}}}}}}
	for _, m := range mutate {
		m(d)
	}
	return d
}

func apart(d *appsv1.Deployment) {
	d.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}}
}

// surgeFree lets seed 001's rollout free a node before its surge pod
// needs one.
func surgeFree(d *appsv1.Deployment) {
	d.Spec.Strategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(1))
}

// webApart is a migration taking web to a hostname anti-affinity, at
// stage on web.
func webApart(stage pgv1.Stage) pgv1.PlacementMigration {
	pm := pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-apart", CreationTimestamp: metav1.NewTime(time.Unix(1, 0))},
		Spec: pgv1.PlacementMigrationSpec{Targets: []pgv1.TargetRef{{Kind: pgv1.KindDeployment, Name: "web"}},
			Constraint: pgv1.Constraint{PodAntiAffinity: &pgv1.PodAntiAffinityConstraint{TopologyKey: corev1.LabelHostname}}}}
	pm.Status.Targets = []pgv1.TargetStatus{{Kind: pgv1.KindDeployment, Name: "web", Stage: stage}}
	return pm
}

func request(t *testing.T, op admissionv1.Operation, old, obj client.Object, fieldManager string) admission.Request {
	t.Helper()
	raw := func(o client.Object) runtime.RawExtension {
		if o == nil {
			return runtime.RawExtension{}
		}
		data, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: data}
	}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: op, Namespace: "shop", Name: "web", Kind: metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		Object: raw(obj), OldObject: raw(old),
	}}
	if fieldManager != "" {
		req.Options = runtime.RawExtension{Raw: []byte(`{"fieldManager":"` + fieldManager + `"}`)}
	}
	return req
}

func validator(t *testing.T, namespaceMode string, mode pgadmission.Mode) (*Validator, *twoNodes) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{}}}
	if namespaceMode != "" {
		ns.Labels[pgv1.AdmissionLabel] = namespaceMode
	}
	cluster := newTwoNodes(t)
	return &Validator{Cluster: cluster, Namespaces: fake.NewClientBuilder().WithScheme(scheme).WithObjects(ns).Build(),
		Decoder: admission.NewDecoder(scheme), Default: mode, Skip: []string{"kube-system"}, Budget: time.Second, Operator: operatorUser}, cluster
}

// operatorUser is the user the operator's requests come as in these tests.
const operatorUser = "system:serviceaccount:placement-guard-system:placement-guard-controller-manager"

// asUser is req as user sent it.
func asUser(req admission.Request, user string) admission.Request {
	req.UserInfo.Username = user
	return req
}

// Which requests are judged, and what each mode answers: seed 001's shape
// is warned of, refused in Deny, and nothing else is touched.
func TestWhatTheCheckAnswers(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name          string
		namespaceMode string
		mode          pgadmission.Mode
		req           func(t *testing.T) admission.Request
		allowed       bool
		says          string
	}{
		{"seed 001 in Warn: admitted with the deadlock and its fix", "", pgadmission.ModeWarn,
			func(t *testing.T) admission.Request {
				return request(t, admissionv1.Update, web(), web(apart), "kubectl")
			}, true, "maxUnavailable: 1"},
		{"seed 001 in a Deny namespace: refused with the same words", "Deny", pgadmission.ModeWarn,
			func(t *testing.T) admission.Request {
				return request(t, admissionv1.Update, web(), web(apart), "kubectl")
			}, false, "RolloutDeadlock"},
		{"a namespace labelled with a typo in an Off cluster: judged as Warn, never Off", "Denny", pgadmission.ModeOff,
			func(t *testing.T) admission.Request {
				return request(t, admissionv1.Update, web(), web(apart), "kubectl")
			}, true, "RolloutDeadlock"},
		{"a namespace labelled with a typo in a Deny cluster: judged as Warn", "deny", pgadmission.ModeDeny,
			func(t *testing.T) admission.Request {
				return request(t, admissionv1.Update, web(), web(apart), "kubectl")
			}, true, "RolloutDeadlock"},
		{"a namespace Off in a Deny cluster: admitted silently", "Off", pgadmission.ModeDeny,
			func(t *testing.T) admission.Request { return request(t, admissionv1.Update, web(), web(apart), "") }, true, ""},
		{"an image change: admitted silently, never judged", "Deny", pgadmission.ModeDeny,
			func(t *testing.T) admission.Request {
				return request(t, admissionv1.Update, web(apart), web(apart, func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "x:2" }), "")
			}, true, ""},
		{"a workload that opts out", "Deny", pgadmission.ModeDeny,
			func(t *testing.T) admission.Request {
				return request(t, admissionv1.Update, web(), web(apart, func(d *appsv1.Deployment) { d.Labels = map[string]string{pgv1.AdmissionLabel: "Off"} }), "")
			}, true, ""},
		{"a migration's own write: its field manager, from the operator", "Deny", pgadmission.ModeDeny,
			func(t *testing.T) admission.Request {
				return asUser(request(t, admissionv1.Update, web(), web(apart), workloadpatch.FieldManager("web-apart")), operatorUser)
			}, true, ""},
		{"a migration's field manager from another user in Deny: refused, whatever it changes", "Deny", pgadmission.ModeWarn,
			func(t *testing.T) admission.Request {
				return asUser(request(t, admissionv1.Update, web(), web(apart, surgeFree), workloadpatch.FieldManager("x")), "jane")
			}, false, `field manager "placement-guard/x" is reserved for placement-guard's migrations, and jane is not the operator`},
		{"a migration's field manager from another user in Warn: judged as any write", "", pgadmission.ModeWarn,
			func(t *testing.T) admission.Request {
				return asUser(request(t, admissionv1.Update, web(), web(apart), workloadpatch.FieldManager("web-apart")), "jane")
			}, true, "RolloutDeadlock"},
		{"the operator's user under another field manager: judged as any write", "Deny", pgadmission.ModeDeny,
			func(t *testing.T) admission.Request {
				return asUser(request(t, admissionv1.Update, web(), web(apart), "kubectl"), operatorUser)
			}, false, "RolloutDeadlock"},
		{"kube-system", "Deny", pgadmission.ModeDeny,
			func(t *testing.T) admission.Request {
				r := request(t, admissionv1.Update, web(), web(apart), "")
				r.Namespace = "kube-system"
				return r
			}, true, ""},
		{"a delete", "Deny", pgadmission.ModeDeny,
			func(t *testing.T) admission.Request { return request(t, admissionv1.Delete, web(apart), nil, "") }, true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, _ := validator(t, c.namespaceMode, c.mode)
			resp := v.Handle(ctx, c.req(t))
			if resp.Allowed != c.allowed {
				t.Fatalf("allowed %v, want %v: %+v", resp.Allowed, c.allowed, resp.Result)
			}
			said := strings.Join(resp.Warnings, "\n")
			if resp.Result != nil {
				said += resp.Result.Message
			}
			if c.says == "" && said != "" {
				t.Fatalf("want silence, said %q", said)
			}
			if !strings.Contains(said, c.says) {
				t.Fatalf("want %q said, got %q", c.says, said)
			}
			for _, w := range resp.Warnings {
				if len([]rune(w)) > 256 {
					t.Fatalf("a warning of %d characters", len([]rune(w)))
				}
			}
		})
	}
}

// A change to a field a PlacementMigration writes names the migration (the
// operator would write its entry back over the change), and is judged all
// the same: a second writer never makes seed 001's deadlock admissible.
func TestAChangeOverAMigrationsFieldNamesIt(t *testing.T) {
	ctx := context.Background()
	v, cluster := validator(t, "Deny", pgadmission.ModeWarn)
	cluster.migrations = []pgv1.PlacementMigration{webApart(pgv1.StageSoft)}
	claim := "TargetClaimed: the change writes the pod anti-affinity term lists, which PlacementMigration web-apart writes"

	resp := v.Handle(ctx, request(t, admissionv1.Update, web(), web(apart), "helm"))
	if resp.Allowed || !strings.Contains(resp.Result.Message, "RolloutDeadlock") || !strings.Contains(resp.Result.Message, claim) {
		t.Fatalf("seed 001 over web-apart's field: want refused, naming the deadlock and web-apart; got allowed %v: %+v", resp.Allowed, resp.Result)
	}
	resp = v.Handle(ctx, request(t, admissionv1.Update, web(), web(apart, surgeFree), "helm"))
	if !resp.Allowed || !strings.Contains(strings.Join(resp.Warnings, "\n"), claim) {
		t.Fatalf("a change that fits over web-apart's field: want admitted, naming web-apart; got allowed %v, %q", resp.Allowed, resp.Warnings)
	}
	// The same change to a workload already carrying the constraint (the
	// migration's own entry, or a chart applied again) claims nothing.
	resp = v.Handle(ctx, request(t, admissionv1.Update, web(apart), web(apart, surgeFree), "helm"))
	if !resp.Allowed || strings.Contains(strings.Join(resp.Warnings, "\n"), "TargetClaimed") {
		t.Fatalf("a strategy change beside a carried constraint: want no claim; got allowed %v, %q", resp.Allowed, resp.Warnings)
	}
}

// A malformed object is answered with an error, never a panic; an answer
// the engine cannot give within the budget admits the change and says so.
func TestTheCheckCannotHurtTheCluster(t *testing.T) {
	ctx := context.Background()
	v, cluster := validator(t, "Deny", pgadmission.ModeDeny)
	for _, raw := range []string{
		`{"apiVersion":"apps/v1","kind":"Deployment","spec":{"replicas":"many","template":{"spec":{"topologySpreadConstraints":[{"whenUnsatisfiable":"DoNotSchedule"}]}}}}`,
		`{"apiVersion":"apps/v1","kind":"Deployment","spec":`,
	} {
		bad := request(t, admissionv1.Update, web(), web(apart), "")
		bad.Object.Raw = []byte(raw)
		if resp := v.Handle(ctx, bad); resp.Allowed || resp.Result == nil || resp.Result.Code != 400 {
			t.Fatalf("a malformed object %s: %+v", raw, resp)
		}
	}
	unknown := request(t, admissionv1.Create, nil, web(apart), "")
	unknown.Object.Raw = []byte(`{"apiVersion":"apps/v1","kind":"DaemonSet","spec":{"template":{"spec":{"affinity":{"podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"topologyKey":"x"}]}}}}}}`)
	if resp := v.Handle(ctx, unknown); resp.Allowed || resp.Result.Code != 400 {
		t.Fatalf("a kind it does not judge: %+v", resp)
	}
	cluster.delay = 300 * time.Millisecond
	v.Budget = 50 * time.Millisecond
	resp := v.Handle(ctx, request(t, admissionv1.Update, web(), web(apart), ""))
	if !resp.Allowed || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "not judged") {
		t.Fatalf("an answer past the budget admits, saying so: %+v", resp)
	}
}

// The check's port answers whoever reaches it. Crafted reviews, of kinds
// and namespaces made up by the hundred, leave the metrics' label values
// bounded; and a judgement that finds the check judging all it may at once
// is answered at once, not queued.
func TestATenantCannotGrowTheRegistryNorQueueTheCheck(t *testing.T) {
	ctx := context.Background()
	v, _ := validator(t, "", pgadmission.ModeWarn)
	for i := range 300 {
		req := request(t, admissionv1.Update, web(), web(apart), "kubectl")
		req.Namespace = fmt.Sprintf("ghost-%d", i)
		if i%2 == 0 {
			req.Kind.Kind = fmt.Sprintf("Kind%d", i)
		}
		v.Handle(ctx, req)
	}
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	values := func(family, label string) map[string]bool {
		out := map[string]bool{}
		for _, f := range families {
			if f.GetName() != family {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == label {
						out[l.GetValue()] = true
					}
				}
			}
		}
		return out
	}
	for kind := range values("placementguard_admission_duration_seconds", "kind") {
		if !slices.Contains([]string{"Deployment", "StatefulSet", "Other"}, kind) {
			t.Errorf("a kind label %q from a request", kind)
		}
	}
	findings := values("placementguard_admission_findings_total", "namespace")
	for ns := range findings {
		if strings.HasPrefix(ns, "ghost-") {
			t.Fatalf("a namespace label %q the cluster does not have", ns)
		}
	}
	if !findings[""] {
		t.Fatal("the findings in unknown namespaces were not counted at all")
	}

	// Four slots: one source address may hold three. A flooding pod
	// holds its three; the API server's request is judged in the fourth,
	// and one more from the flooding pod is answered at once.
	v.Judging = NewSlots(4)
	flooding, server := caller{source: "10.0.0.66"}, caller{source: "10.0.0.1"}
	flooder := context.WithValue(ctx, callerKey{}, flooding)
	apiServer := context.WithValue(ctx, callerKey{}, server)
	for range 3 {
		if !v.Judging.take(flooding.holderFor("")) {
			t.Fatal("a source may hold three of four slots")
		}
	}
	start := time.Now()
	resp := v.Handle(flooder, request(t, admissionv1.Update, web(), web(apart), "kubectl"))
	if !resp.Allowed || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "not judged (the check is judging as many changes as it may at once)") {
		t.Fatalf("a fourth judgement from one source: want admitted at once, saying so; got %+v", resp)
	}
	if waited := time.Since(start); waited > v.Budget/2 {
		t.Fatalf("waited %s for a slot", waited)
	}
	if resp := v.Handle(apiServer, request(t, admissionv1.Update, web(), web(apart), "kubectl")); !strings.Contains(strings.Join(resp.Warnings, " "), "RolloutDeadlock") {
		t.Fatalf("another source is judged in the slot left: %+v", resp.Warnings)
	}
	v.Judging.take(server.holderFor(""))
	if resp := v.Handle(apiServer, request(t, admissionv1.Update, web(), web(apart), "kubectl")); strings.Contains(strings.Join(resp.Warnings, " "), "RolloutDeadlock") {
		t.Fatalf("with every slot taken nothing is judged: %+v", resp.Warnings)
	}
	v.Judging.give(flooding.holderFor(""))
	if resp := v.Handle(apiServer, request(t, admissionv1.Update, web(), web(apart), "kubectl")); !strings.Contains(strings.Join(resp.Warnings, " "), "RolloutDeadlock") {
		t.Fatalf("a slot given back is taken again: %+v", resp.Warnings)
	}
}

// scaleRequest is a write of replicas to web's scale subresource, from
// before.
func scaleRequest(t *testing.T, before, replicas int32) admission.Request {
	t.Helper()
	scale := func(n int32) runtime.RawExtension {
		raw, err := json.Marshal(map[string]any{"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": map[string]any{"name": "web", "namespace": "shop"},
			"spec": map[string]any{"replicas": n}})
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: raw}
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Update, Namespace: "shop", Name: "web", SubResource: "scale",
		Kind:     metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"},
		Resource: metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
		Object:   scale(replicas), OldObject: scale(before),
	}}
}

// A scale through the subresource (kubectl scale, an autoscaler) of a
// workload that carries a hard constraint is judged. In Deny, a person's
// scale that leaves replicas unplaceable is refused; an autoscaler's,
// known by the user the API server says it comes as, is admitted with
// the findings as warnings: autoscaling is never refused.
func TestAScaleIsRefusedOnlyWhenAPersonsScaleLeavesReplicasUnplaceable(t *testing.T) {
	ctx := context.Background()
	const hpa = "system:kube-controller-manager"
	for _, c := range []struct {
		mode, user string
		allowed    bool
	}{{"Warn", "alice", true}, {"Warn", hpa, true}, {"Deny", hpa, true}, {"Deny", "alice", false}} {
		v, cluster := validator(t, c.mode, pgadmission.ModeWarn)
		cluster.workload = web(apart)
		resp := v.Handle(ctx, asUser(scaleRequest(t, 2, 5), c.user))
		said := strings.Join(append(resp.Warnings, resp.Result.Message), "\n")
		if resp.Allowed != c.allowed || !strings.Contains(said, "Deployment/web") || !strings.Contains(said, "InsufficientCapacity") {
			t.Fatalf("%s, %s: 5 replicas apart on 2 nodes: want allowed %v with the capacity named; got allowed %v, %q", c.mode, c.user, c.allowed, resp.Allowed, said)
		}
	}
	v, cluster := validator(t, "Deny", pgadmission.ModeWarn)
	cluster.workload = web()
	if resp := v.Handle(ctx, scaleRequest(t, 2, 5)); !resp.Allowed || len(resp.Warnings) != 0 {
		t.Fatalf("a workload without a hard constraint scales silently: %+v", resp)
	}
	cluster.workload = web(apart)
	if resp := v.Handle(ctx, scaleRequest(t, 2, 2)); !resp.Allowed || len(resp.Warnings) != 0 {
		t.Fatalf("a scale to the replicas it has says nothing: %+v", resp)
	}
	// From 5, scaling to 4 leaves fewer replicas unplaceable: the way out
	// is never refused.
	cluster.workload = web(apart, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](5) })
	if resp := v.Handle(ctx, asUser(scaleRequest(t, 5, 4), "alice")); !resp.Allowed {
		t.Fatalf("a scale down of an unsatisfiable workload is refused: %+v", resp)
	}
	cluster.workload = nil
	if resp := v.Handle(ctx, scaleRequest(t, 2, 5)); !resp.Allowed {
		t.Fatalf("a scale of a workload not in the cache is admitted: %+v", resp)
	}
}

// Deny refuses only what a change makes worse: the remedy of a workload
// that is already unsatisfiable goes through, with a warning, and a
// change that adds to it is refused.
func TestDenyRefusesOnlyWhatAChangeMakesWorse(t *testing.T) {
	ctx := context.Background()
	v, _ := validator(t, "Deny", pgadmission.ModeWarn)
	five := func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](5) }
	four := func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](4) }
	for _, c := range []struct {
		name     string
		old, new *appsv1.Deployment
		allowed  bool
		says     string
	}{
		{"fewer replicas of a workload that cannot place them all", web(apart, five), web(apart, four), true, "admitted in Deny: the workload was already so"},
		{"more replicas of one that cannot place them all", web(apart, four), web(apart, five), false, "InsufficientCapacity"},
		{"a strategy fixed beside a capacity it still lacks", web(apart, five), web(apart, five, surgeFree), true, "admitted in Deny"},
		{"a deadlock added to a workload that had none", web(), web(apart), false, "RolloutDeadlock"},
		{"moved to a pool with no nodes", web(apart, surgeFree), web(apart, surgeFree, func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "b"}
		}), false, "have 0 of 2 qualifying nodes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := v.Handle(ctx, request(t, admissionv1.Update, c.old, c.new, "helm"))
			said := strings.Join(resp.Warnings, "\n")
			if resp.Result != nil {
				said += resp.Result.Message
			}
			if resp.Allowed != c.allowed || !strings.Contains(said, c.says) {
				t.Fatalf("allowed %v (want %v), said %q (want %q)", resp.Allowed, c.allowed, said, c.says)
			}
		})
	}
}
