package targets

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// TestEveryKindAnswersEveryQuestion: a kind added without one of its
// answers fails here, not in a reconcile.
func TestEveryKindAnswersEveryQuestion(t *testing.T) {
	for _, k := range Kinds() {
		if k.Name == "" || k.Resource == "" || k.ShortName == "" || k.New == nil || k.NewList == nil || k.Items == nil ||
			k.NewApplyConfiguration == nil || k.is == nil || k.workload == nil || k.progress == nil || k.paused == nil || k.partitioned == nil || k.template == nil || k.replicas == nil || k.counts == nil {
			t.Fatalf("kind %q lacks an answer: %+v", k.Name, k)
		}
		if got := KindOf(k.New()); got != k {
			t.Errorf("KindOf(%T) = %v, want %s", k.New(), got, k.Name)
		}
		if got := KindNamed(string(k.Name)); got != k {
			t.Errorf("KindNamed(%q) = %v", k.Name, got)
		}
		if items := k.Items(k.NewList()); len(items) != 0 {
			t.Errorf("%s: an empty list has %d items", k.Name, len(items))
		}
		obj := k.New()
		TemplateOf(obj).Spec.NodeName = "written-in-place"
		if w := WorkloadOf(obj); w == nil || w.Template.Spec.NodeName != "written-in-place" {
			t.Errorf("%s: TemplateOf is not the object's own template", k.Name)
		}
		if w := WorkloadOf(k.New()); w == nil || w.Kind != k.Name || w.Replicas != 1 {
			t.Errorf("%s: an empty object's workload: %+v (the API defaults one replica)", k.Name, w)
		}
	}
	for _, other := range []any{&appsv1.ReplicaSet{}, &appsv1.DaemonSet{}, &corev1.Pod{}, appsv1.Deployment{}, nil} {
		if KindOf(other) != nil || WorkloadOf(other) != nil || Build(nil, nil, nil) != nil {
			t.Errorf("%T is not a kind the project migrates", other)
		}
	}
	if _, err := NewObject("DaemonSet"); err == nil {
		t.Error("a DaemonSet is not a kind the project migrates")
	}
}

func TestKindsAreSpelledAsKubectlSpellsThem(t *testing.T) {
	for s, want := range map[string]pgv1.WorkloadKind{
		"deploy": pgv1.KindDeployment, "Deployment": pgv1.KindDeployment, "deployments.apps": pgv1.KindDeployment,
		"sts": pgv1.KindStatefulSet, "statefulset": pgv1.KindStatefulSet, "StatefulSets.apps": pgv1.KindStatefulSet,
	} {
		if k := KindSpelled(s); k == nil || k.Name != want {
			t.Errorf("KindSpelled(%q) = %v, want %s", s, k, want)
		}
	}
	for _, s := range []string{"ds", "daemonset", "rs", "deploy.batch", ""} {
		if k := KindSpelled(s); k != nil {
			t.Errorf("KindSpelled(%q) = %s, want none", s, k.Name)
		}
	}
}

// TestPodLabelsAreTheControllers: lint's simulated pods carry the labels
// the kind's controller gives them, which a spread or term may select.
func TestPodLabelsAreTheControllers(t *testing.T) {
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}}}
	sts := FromStatefulSet(&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: appsv1.StatefulSetSpec{Template: tmpl}}, nil)
	got := PodLabels(sts, "db-2", "r1")
	want := map[string]string{"app": "db", appsv1.ControllerRevisionHashLabelKey: "r1", appsv1.StatefulSetPodNameLabel: "db-2", appsv1.PodIndexLabel: "2"}
	if len(got) != len(want) {
		t.Fatalf("StatefulSet pod labels %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("StatefulSet pod labels %v, want %v", got, want)
		}
	}
	d := FromDeployment(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1.DeploymentSpec{Template: tmpl}}, nil, nil)
	if got := PodLabels(d, "web-0", "h1"); len(got) != 2 || got[appsv1.DefaultDeploymentUniqueLabelKey] != "h1" || got["app"] != "db" {
		t.Fatalf("Deployment pod labels %v", got)
	}
	if tmpl.Labels[appsv1.StatefulSetPodNameLabel] != "" {
		t.Fatal("the template's labels were written to")
	}
}

func TestOnlyAStatefulSetWithAPartitionIsPartitioned(t *testing.T) {
	sts := func(partition *int32) *Target {
		s := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
			Type: appsv1.RollingUpdateStatefulSetStrategyType, RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: partition}}}}
		return Build(s, nil, nil)
	}
	if !sts(ptr.To[int32](2)).Partitioned() || sts(ptr.To[int32](0)).Partitioned() || sts(nil).Partitioned() {
		t.Fatal("a StatefulSet is partitioned when its partition is above zero")
	}
	if Build(&appsv1.Deployment{Spec: appsv1.DeploymentSpec{Paused: true}}, nil, nil).Partitioned() {
		t.Fatal("a Deployment has no partition")
	}
	if !Build(&appsv1.Deployment{Spec: appsv1.DeploymentSpec{Paused: true}}, nil, nil).Paused() || Build(&appsv1.StatefulSet{}, nil, nil).Paused() {
		t.Fatal("a Deployment with spec.paused is paused; a StatefulSet never is")
	}
}

func TestOnlyADeploymentRanksItsScaleDownByCost(t *testing.T) {
	if !Build(&appsv1.Deployment{}, nil, nil).Interchangeable() || Build(&appsv1.StatefulSet{}, nil, nil).Interchangeable() {
		t.Fatal("a Deployment's ReplicaSets remove pods by pod-deletion-cost; a StatefulSet removes its highest ordinal")
	}
}
