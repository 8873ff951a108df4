package podwire

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// heartbeatOf is n as its next heartbeat posts it: a new resourceVersion
// and the Ready condition's heartbeat time moved on.
func heartbeatOf(n *corev1.Node, version string, at time.Time) *corev1.Node {
	next := n.DeepCopy()
	next.ResourceVersion = version
	for i := range next.Status.Conditions {
		next.Status.Conditions[i].LastHeartbeatTime = metav1.NewTime(at)
	}
	return next
}

// decodeNodeBoth decodes n stripped and as TrimNode keeps its full decoding.
func decodeNodeBoth(t *testing.T, n *corev1.Node) (stripped, trimmed *corev1.Node) {
	t.Helper()
	raw, err := n.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	trimmed = &corev1.Node{}
	if err := trimmed.Unmarshal(raw); err != nil {
		t.Fatal(err)
	}
	TrimNode(trimmed)
	stripped = &corev1.Node{}
	if err := DecodeNode(raw, stripped); err != nil {
		t.Fatal(err)
	}
	return stripped, trimmed
}

func sameMap[M ~map[K]V, K comparable, V any](a, b M) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func heartbeatNode(name string) *corev1.Node {
	n := kwokNode(name)
	n.UID = types.UID("uid-" + name)
	n.Status.Conditions = []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: metav1.NewTime(time.Unix(100, 0))},
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.NewTime(time.Unix(100, 0)), LastTransitionTime: metav1.NewTime(time.Unix(50, 0))},
	}
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")}
	return n
}

// TestAHeartbeatIsTheNodeBeforeIt: a node's heartbeat, which changes
// only its resourceVersion and its conditions' heartbeat times, is
// decoded as the node before it with the new version, sharing its maps;
// what it holds is what its own full decoding, trimmed, holds.
func TestAHeartbeatIsTheNodeBeforeIt(t *testing.T) {
	n := heartbeatNode("heartbeat-a")
	first, _ := decodeNodeBoth(t, n)
	beat := heartbeatOf(n, "8", time.Unix(140, 0))
	second, trimmed := decodeNodeBoth(t, beat)
	if !equality.Semantic.DeepEqual(second, trimmed) {
		t.Fatalf("a heartbeat decodes otherwise than its trimmed full decoding (-trimmed +decoded):\n%s", cmp.Diff(trimmed, second))
	}
	if second.ResourceVersion != "8" {
		t.Errorf("the heartbeat's node has resourceVersion %q, want its own, 8", second.ResourceVersion)
	}
	if !sameMap(first.Labels, second.Labels) || !sameMap(first.Status.Allocatable, second.Status.Allocatable) {
		t.Error("the heartbeat was decoded anew: its labels and allocatable resources are not the node's before it")
	}
	if got := second.Status.Conditions; len(got) != 1 || !got[0].LastHeartbeatTime.IsZero() || got[0].Reason != "KubeletReady" {
		t.Errorf("the Ready condition is kept, without its heartbeat's time: %+v", got)
	}
}

// TestANodeThatChangedIsDecodedAnew: any change of what the engine reads,
// made along with a heartbeat, comes through whole.
func TestANodeThatChangedIsDecodedAnew(t *testing.T) {
	changes := map[string]func(*corev1.Node){
		"label":         func(n *corev1.Node) { n.Labels["zone"] = "b" },
		"annotation":    func(n *corev1.Node) { n.Annotations = map[string]string{"a": "b"} },
		"taint":         func(n *corev1.Node) { n.Spec.Taints = nil },
		"cordon":        func(n *corev1.Node) { n.Spec.Unschedulable = true },
		"allocatable":   func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("3") },
		"not ready":     func(n *corev1.Node) { n.Status.Conditions[1].Status = corev1.ConditionFalse },
		"ready's since": func(n *corev1.Node) { n.Status.Conditions[1].LastTransitionTime = metav1.NewTime(time.Unix(60, 0)) },
		"image":         func(n *corev1.Node) { n.Status.Images[0].SizeBytes++ },
		"uid":           func(n *corev1.Node) { n.UID = "another" },
		"deleting":      func(n *corev1.Node) { n.DeletionTimestamp = &metav1.Time{Time: time.Unix(200, 0)} },
	}
	for what, change := range changes {
		t.Run(what, func(t *testing.T) {
			n := heartbeatNode("changed-" + what)
			before, _ := decodeNodeBoth(t, n)
			beat := heartbeatOf(n, "9", time.Unix(150, 0))
			change(beat)
			after, trimmed := decodeNodeBoth(t, beat)
			if !equality.Semantic.DeepEqual(after, trimmed) {
				t.Fatalf("the changed node decodes otherwise than its trimmed full decoding (-trimmed +decoded):\n%s", cmp.Diff(trimmed, after))
			}
			if equality.Semantic.DeepEqual(before, after) {
				t.Fatal("the change was lost")
			}
		})
	}
}

// TestAForgottenOrRenamedNodeIsDecodedAnew: a node the feed saw deleted
// is forgotten, and one whose holder changed it is not given back.
func TestAForgottenOrRenamedNodeIsDecodedAnew(t *testing.T) {
	n := heartbeatNode("forgotten")
	first, _ := decodeNodeBoth(t, n)
	ForgetNode(n.Name)
	second, _ := decodeNodeBoth(t, heartbeatOf(n, "10", time.Unix(160, 0)))
	if sameMap(first.Labels, second.Labels) {
		t.Error("a forgotten node was given back")
	}
	second.Name = "renamed"
	third, trimmed := decodeNodeBoth(t, heartbeatOf(n, "11", time.Unix(170, 0)))
	if third.Name != n.Name || !equality.Semantic.DeepEqual(third, trimmed) {
		t.Errorf("a node its holder renamed was given back: %+v", third)
	}
}

// TestRandomNodesDecodeAsFullOnesAcrossHeartbeats: whatever a node holds,
// it and its heartbeat decode as TrimNode keeps their full decodings.
func TestRandomNodesDecodeAsFullOnesAcrossHeartbeats(t *testing.T) {
	f := newFiller(3)
	for i := range 500 {
		n := &corev1.Node{}
		f.Fill(n)
		if len(n.Status.Conditions) > 0 {
			n.Status.Conditions[i%len(n.Status.Conditions)].Type = corev1.NodeReady
		}
		for step, node := range []*corev1.Node{n, heartbeatOf(n, fmt.Sprint(i), time.Unix(int64(i), 0))} {
			got, trimmed := decodeNodeBoth(t, node)
			if !equality.Semantic.DeepEqual(got, trimmed) {
				t.Fatalf("node %q, step %d, decodes otherwise (-trimmed +decoded):\n%s", node.Name, step, cmp.Diff(trimmed, got))
			}
		}
	}
}

// TestTheNodesRememberedAreBounded: past maxRememberedNodes names, the
// memory starts again.
func TestTheNodesRememberedAreBounded(t *testing.T) {
	for i := range maxRememberedNodes + 10 {
		decodeNodeBoth(t, heartbeatNode(fmt.Sprintf("bounded-%d", i)))
	}
	heartbeats.mu.Lock()
	defer heartbeats.mu.Unlock()
	if n := len(heartbeats.byName); n > maxRememberedNodes {
		t.Errorf("%d nodes remembered, want at most %d", n, maxRememberedNodes)
	}
}
