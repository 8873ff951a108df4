package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
	"github.com/placement-guard/placement-guard/internal/planning"
)

var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

type podState func(*corev1.Pod)

func readyAt(at time.Time) podState {
	return func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)}}
	}
}

func startedAt(at time.Time, restarts int32) podState {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", RestartCount: restarts,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(at)}}}}
	}
}

func testPod(name string, created time.Time, states ...podState) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(created)}}
	for _, s := range states {
		s(p)
	}
	return p
}

func TestPodsAreStableOnlyOnceTheyRanWithoutARestartForMinPodAge(t *testing.T) {
	minAge := 2 * time.Minute
	now := t0.Add(time.Hour)
	cases := []struct {
		name     string
		pod      *corev1.Pod
		stable   bool
		stableAt time.Time
	}{
		{"ready and running for an hour", testPod("old", t0, readyAt(t0), startedAt(t0, 0)), true, time.Time{}},
		{"not Ready", testPod("starting", t0, startedAt(t0, 0)), false, time.Time{}},
		{"old, but its container restarted a minute ago: a crash loop Ready for a moment",
			testPod("looping", t0, readyAt(now.Add(-30*time.Second)), startedAt(now.Add(-time.Minute), 7)), false, now.Add(90 * time.Second)},
		{"old, Ready again 30 s ago after a restart long ago", testPod("flapping", t0, readyAt(now.Add(-30*time.Second)), startedAt(t0, 1)), false, now.Add(90 * time.Second)},
		{"created a minute ago", testPod("young", now.Add(-time.Minute), readyAt(now.Add(-time.Minute))), false, now.Add(time.Minute)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			why, at := planning.Unstable([]*corev1.Pod{tc.pod}, minAge, now)
			if (why == "") != tc.stable {
				t.Fatalf("stable = %v (%q), want %v", why == "", why, tc.stable)
			}
			if !at.Equal(tc.stableAt) {
				t.Fatalf("look again at %s, want %s", at, tc.stableAt)
			}
			if !tc.stable && tc.pod.Name != "starting" && !strings.Contains(why, "is stable at "+tc.stableAt.Format(time.RFC3339)) {
				t.Fatalf("the message gives the time, not an age: %s", why)
			}
		})
	}
	again, _ := planning.Unstable([]*corev1.Pod{cases[2].pod}, minAge, now.Add(10*time.Second))
	first, _ := planning.Unstable([]*corev1.Pod{cases[2].pod}, minAge, now)
	if again != first {
		t.Fatalf("the message must not change while nothing does:\n%s\n%s", first, again)
	}
}

func TestRestartsSinceARecord(t *testing.T) {
	at := t0.Add(time.Hour)
	before := []*corev1.Pod{
		testPod("a", t0, startedAt(t0, 0)),
		testPod("b", t0, startedAt(t0, 4)),
	}
	rec := recordOf(before, at)
	cases := []struct {
		name string
		rec  *pgv1.PodSetRecord
		pod  *corev1.Pod
		want int32
	}{
		{"a pod without restarts then, none now", rec, testPod("a", t0, startedAt(t0, 0)), 0},
		{"a pod without restarts then, two now", rec, testPod("a", t0, startedAt(at.Add(time.Minute), 2)), 2},
		{"a pod that had restarted: only the new ones count", rec, testPod("b", t0, startedAt(at.Add(time.Minute), 5)), 1},
		{"a pod created since: all of its restarts", rec, testPod("c", at.Add(time.Minute), startedAt(at.Add(2*time.Minute), 3)), 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := restartsSince(tc.rec, tc.pod); got != tc.want {
				t.Fatalf("restarts since = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestARecordOfManyRestartedPodsSaysItIsIncompleteAndStillDetectsNewRestarts(t *testing.T) {
	at := t0.Add(time.Hour)
	var pods []*corev1.Pod
	for i := range 100 {
		pods = append(pods, testPod(fmt.Sprintf("p%03d", i), t0, startedAt(t0, 9)))
	}
	rec := recordOf(pods, at)
	if rec.Count != 100 || rec.Restarts != 900 || len(rec.Restarted) != maxRestartedListed || !rec.RestartedIncomplete {
		t.Fatalf("record = count %d, restarts %d, %d listed, incomplete %v", rec.Count, rec.Restarts, len(rec.Restarted), rec.RestartedIncomplete)
	}
	// A pod past the list that has not restarted since: its old restarts
	// do not look new.
	if got := restartsSince(rec, pods[99]); got != 0 {
		t.Fatalf("an unlisted pod's old restarts count as %d", got)
	}
	restarted := testPod("p099", t0, startedAt(at.Add(time.Minute), 10))
	restarted.UID = pods[99].UID
	if got := restartsSince(rec, restarted); got != 1 {
		t.Fatalf("an unlisted pod restarted since counts %d, want 1", got)
	}
	if summaryOf(pods) == summaryOf(append(pods[:99:99], restarted)) {
		t.Fatal("the digest must change with a restart")
	}
}

func TestProtectedPodChanges(t *testing.T) {
	at := t0.Add(time.Hour)
	broker := testPod("broker-0", t0, startedAt(t0, 0))
	search := testPod("search-0", t0, startedAt(t0, 0))
	rec := protectedRecordOf([]*corev1.Pod{broker, search}, at)
	recreated := testPod("broker-0", at.Add(time.Minute))
	recreated.UID = "new"
	restarted := testPod("search-0", t0, startedAt(at.Add(time.Minute), 1))
	cases := []struct {
		name string
		live []*corev1.Pod
		want string
	}{
		{"unchanged", []*corev1.Pod{broker, search}, ""},
		{"one gone", []*corev1.Pod{search}, "broker-0 (uid uid-broker-0) is gone"},
		{"one recreated", []*corev1.Pod{recreated, search}, "broker-0 was recreated (uid new, was uid-broker-0)"},
		{"one restarted", []*corev1.Pod{broker, restarted}, "search-0 restarted (1 restarts, was 0)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := protectedChanged(rec, tc.live); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
