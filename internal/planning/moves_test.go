package planning

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/placement"
	"github.com/placement-guard/placement-guard/internal/targets"
)

// What a migration keeps where it is, besides what the engine keeps: the
// operator and `kubectl placement plan` ask the same.
func TestAMigrationKeepsProtectedYoungAndJustMovedPods(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	readyFor := func(name string, d time.Duration, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-d))}}}}
	}
	pm := &pgv1.PlacementMigration{Spec: pgv1.PlacementMigrationSpec{Guards: &pgv1.Guards{MinPodAge: &metav1.Duration{Duration: 5 * time.Minute},
		ProtectedPods: &pgv1.LabelSelector{MatchLabels: map[string]pgv1.LabelValue{"role": "leader"}}}}}
	pm.Status.Rebalance = &pgv1.RebalanceStatus{Moves: []pgv1.PodMove{
		{Replacement: "web-moved", At: metav1.NewTime(now.Add(-30 * time.Minute))},
		{Replacement: "web-long-ago", At: metav1.NewTime(now.Add(-2 * time.Hour))}}}
	movable := Movable(pm, now)
	cases := []struct {
		pod  *corev1.Pod
		want string
	}{
		{readyFor("web-1", time.Hour, nil), ""},
		{readyFor("web-2", time.Hour, map[string]string{"role": "leader"}), "protected by guards.protectedPods"},
		{readyFor("web-3", time.Minute, nil), "Ready for less than guards.minPodAge 5m0s"},
		{readyFor("web-moved", time.Hour, nil), "moved here within the hour"},
		{readyFor("web-long-ago", 3*time.Hour, nil), ""},
	}
	for _, tc := range cases {
		if got := movable(tc.pod); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.pod.Name, got, tc.want)
		}
	}
}

// A move leaves a pod unavailable until its replacement is Ready, which a
// rolling update with maxUnavailable 0 does not allow.
func TestARollingUpdateWithoutUnavailabilityForbidsMoves(t *testing.T) {
	strategy := func(surge, unavailable intstr.IntOrString) *targets.Target {
		return targets.Build(&appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(6)), Strategy: appsv1.DeploymentStrategy{
			Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable}}}}, nil, nil)
	}
	if why := strategyForbidsMoves(strategy(intstr.FromInt32(1), intstr.FromInt32(0)).Workload); why == "" {
		t.Error("maxUnavailable 0 allows a move")
	}
	if why := strategyForbidsMoves(strategy(intstr.FromString("25%"), intstr.FromString("25%")).Workload); why != "" {
		t.Errorf("the default strategy forbids moves: %s", why)
	}
}

// A move leaves behind, or loses, the data a pod keeps on its node: a
// hostPath, or an emptyDir on the node's disk. Such pods stay unless the
// migration opts in; a memory-backed emptyDir loses nothing a restart
// would not.
func TestAMigrationKeepsPodsWithDataOnTheirNode(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	with := func(name string, v corev1.VolumeSource) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{
			{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}}, {Name: "data", VolumeSource: v}}}}
		return placement.TrimPod(p)
	}
	pods := map[string]*corev1.Pod{
		"hostPath":        with("web-1", corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/web"}}),
		"disk emptyDir":   with("web-2", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}),
		"memory emptyDir": with("web-3", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}),
	}
	want := map[string]string{
		"hostPath":        "keeps data on its node (hostPath volume data) (spec.rebalance.moveLocalData lets it move)",
		"disk emptyDir":   "keeps data on its node (emptyDir volume data on the node's disk) (spec.rebalance.moveLocalData lets it move)",
		"memory emptyDir": "",
	}
	kept := Movable(&pgv1.PlacementMigration{}, now)
	optIn := Movable(&pgv1.PlacementMigration{Spec: pgv1.PlacementMigrationSpec{Rebalance: &pgv1.Rebalance{MoveLocalData: ptr.To(true)}}}, now)
	for name, pod := range pods {
		if got := kept(pod); got != want[name] {
			t.Errorf("%s: %q, want %q", name, got, want[name])
		}
		if got := optIn(pod); got != "" {
			t.Errorf("%s with moveLocalData: %q, want it movable", name, got)
		}
	}
}
