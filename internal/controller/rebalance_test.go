package controller

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/planning"
	"github.com/placement-guard/placement-guard/internal/targets"
)

var rebalanceNow = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func moveScope(spec pgv1.PlacementMigrationSpec, moves ...pgv1.PodMove) *scope {
	pm := &pgv1.PlacementMigration{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-zones"}, Spec: spec}
	pm.Status.Rebalance = &pgv1.RebalanceStatus{Moves: moves}
	return &scope{pm: pm, now: rebalanceNow}
}

func movedAgo(d time.Duration, result, replacement string) pgv1.PodMove {
	return pgv1.PodMove{Target: "Deployment/web", Pod: "web-x", At: metav1.NewTime(rebalanceNow.Add(-d)), Result: result, Replacement: replacement}
}

// The budget counts the moves of the last hour, refused ones included, and
// says when the oldest of them leaves the window.
func TestTheMoveBudgetCountsTheLastHour(t *testing.T) {
	cases := []struct {
		name  string
		moves []pgv1.PodMove
		used  int
		until time.Duration
	}{
		{name: "no move", until: time.Hour},
		{name: "two landed and a refusal within the hour", used: 3, until: 40 * time.Minute,
			moves: []pgv1.PodMove{movedAgo(20*time.Minute, moveLanded, "a"), movedAgo(10*time.Minute, moveRefused, ""), movedAgo(time.Minute, moveLanded, "b")}},
		{name: "moves older than the hour are forgotten", used: 1, until: 50 * time.Minute,
			moves: []pgv1.PodMove{movedAgo(2*time.Hour, moveLanded, "a"), movedAgo(61*time.Minute, moveLanded, "b"), movedAgo(10*time.Minute, moveLanded, "c")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			used, until := moveScope(pgv1.PlacementMigrationSpec{}, tc.moves...).movesWithin(moveWindow)
			if used != tc.used || until != tc.until {
				t.Fatalf("used %d, next in %s; want %d, %s", used, until, tc.used, tc.until)
			}
		})
	}
}

// What the operator keeps where it is, besides what the engine keeps.
func TestTheOperatorKeepsProtectedYoungAndJustMovedPods(t *testing.T) {
	readyFor := func(name string, d time.Duration, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(rebalanceNow.Add(-d))}}}}
	}
	spec := pgv1.PlacementMigrationSpec{Guards: &pgv1.Guards{MinPodAge: &metav1.Duration{Duration: 5 * time.Minute},
		ProtectedPods: &pgv1.LabelSelector{MatchLabels: map[string]pgv1.LabelValue{"role": "leader"}}}}
	s := moveScope(spec, movedAgo(30*time.Minute, moveLanded, "web-moved"), movedAgo(2*time.Hour, moveLanded, "web-long-ago"))
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
		if got := s.movable(tc.pod); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.pod.Name, got, tc.want)
		}
	}
}

// A move leaves a pod unavailable until its replacement is Ready, which a
// rolling update with maxUnavailable 0 does not allow.
func TestARollingUpdateWithoutUnavailabilityForbidsMoves(t *testing.T) {
	target := func(surge, unavailable intstr.IntOrString) *target {
		d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(6)), Strategy: appsv1.DeploymentStrategy{
			Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable}}}}
		return &target{Target: &planning.Target{Target: targets.Build(d, nil, nil)}}
	}
	s := moveScope(pgv1.PlacementMigrationSpec{})
	if why := s.strategyForbidsMoves(target(intstr.FromInt32(1), intstr.FromInt32(0))); why == "" {
		t.Error("maxUnavailable 0 allows a move")
	}
	if why := s.strategyForbidsMoves(target(intstr.FromString("25%"), intstr.FromString("25%"))); why != "" {
		t.Errorf("the default strategy forbids moves: %s", why)
	}
}
