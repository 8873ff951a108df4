package planning

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	pgv1 "github.com/placement-guard/placement-guard/api/v1alpha1"
)

// A pod the scheduler leaves Pending past the grace is the constraint's
// doing only when the engine places it without the constraint; one kept
// out by something else is named apart, and one not yet past the grace is
// looked at again when it is.
func TestPendingPodsAreSplitByWhatKeepsThemOut(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	snap, ts := apartCluster(t, corev1.LabelHostname, 3, 3, 1)
	api := ts[0]
	pending := func(name string, waited time.Duration, cpu string) *corev1.Pod {
		p := api.Pods[0].DeepCopy()
		p.Name, p.UID, p.Spec.NodeName = name, types.UID("uid-"+name), ""
		if cpu != "" {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resourceQuantity(cpu)}
		}
		p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available", LastTransitionTime: metav1.NewTime(now.Add(-waited))}}}
		return p
	}
	api.Pods = append(api.Pods, pending("api-kept-out", time.Minute, ""), pending("api-too-big", time.Minute, "64"), pending("api-new", time.Second, ""))
	api.Workload.Replicas = 6
	entry := &api.Template().Spec
	found, recheck, err := Pending(snap, &pgv1.PlacementMigrationSpec{}, ts, func(*Target) *corev1.PodSpec { return entry }, now, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || strings.Join(found[0].ByConstraint, ",") != "api-kept-out" || strings.Join(found[0].Other, ",") != "api-too-big" {
		t.Fatalf("found %+v", found)
	}
	if found[0].Shortfall != "3 of 6 qualifying nodes" {
		t.Errorf("shortfall %q", found[0].Shortfall)
	}
	if recheck != 29*time.Second {
		t.Errorf("looks again in %v, want when the young pod's grace runs out, 29s", recheck)
	}
	v := DescribePending(pgv1.StageHard, found)
	if v.Reason != pgv1.ReasonConstraintUnsatisfied || v.ByConstraint != 1 || v.Other != 1 ||
		!strings.Contains(v.Message, "1 of 6 pods of Deployment/api Pending because of the Hard constraint (api-kept-out): it needs more qualifying capacity, 3 of 6 qualifying nodes") ||
		!strings.Contains(v.Message, "Pending for a reason the constraint does not cause (api-too-big): 0/3 nodes are available") {
		t.Errorf("verdict %+v", v)
	}
	worst, waited, err := KeptOutLongest(snap, api, entry, now)
	if err != nil || worst != "pod api-kept-out is Pending: 0/3 nodes are available" || waited != time.Minute {
		t.Errorf("kept out longest: %q for %v (%v)", worst, waited, err)
	}
}

// A pod the scheduler called unschedulable, for which room has appeared
// since (a fourth node), is neither the constraint's doing nor another
// cause: it is named apart, as one the scheduler has yet to place.
func TestAPendingPodWithRoomNowIsNamedApart(t *testing.T) {
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	snap, ts := apartCluster(t, corev1.LabelHostname, 4, 3, 1)
	api := ts[0]
	p := api.Pods[0].DeepCopy()
	p.Name, p.UID, p.Spec.NodeName = "api-waits", "uid-api-waits", ""
	p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available", LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))}}}
	api.Pods = append(api.Pods, p)
	api.Workload.Replicas = 4
	entry := &api.Template().Spec
	found, _, err := Pending(snap, &pgv1.PlacementMigrationSpec{}, ts, func(*Target) *corev1.PodSpec { return entry }, now, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || len(found[0].ByConstraint)+len(found[0].Other) != 0 || strings.Join(found[0].Placeable, ",") != "api-waits" {
		t.Fatalf("found %+v", found)
	}
	if v := DescribePending(pgv1.StageHard, found); v.ByConstraint+v.Other != 0 {
		t.Errorf("a pod with room counted as kept out: %+v", v)
	}
	n, msg := DescribePlaceable(found)
	if n != 1 || msg != "1 of 4 pods of Deployment/api still Pending (api-waits): room has appeared for them, and the scheduler has not placed them yet" {
		t.Errorf("placeable: %d, %q", n, msg)
	}
	if n, msg := DescribePlaceable(nil); n != 0 || msg != "" {
		t.Errorf("nothing placeable: %d, %q", n, msg)
	}
}
