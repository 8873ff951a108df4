package clusterstate

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// BenchmarkNodeHeartbeats takes node heartbeats into an engine holding
// 1,000 nodes the way the node feed does: protobuf frames decoded by
// podwire, handed to the store as the reflector hands them. A heartbeat
// changes a node's resourceVersion and its conditions' heartbeat times,
// as kubelets and kwok post them; ns/event is the manager's cost of one
// without the connection's (TLS, HTTP).
func BenchmarkNodeHeartbeats(b *testing.B) {
	const held = benchNodes
	state := NewClusterState()
	store := newNodeFeed(nil, state, nil).store
	var list []any
	for i := range held {
		list = append(list, benchNode(i, 0))
	}
	if err := store.Replace(list, "1"); err != nil {
		b.Fatal(err)
	}
	// Each pass is a heartbeat of every node, a minute after the one before.
	streams := [2][]byte{heartbeatStream(b, held, 1), heartbeatStream(b, held, 2)}
	update := func(ev watch.Event) error { return store.Update(ev.Object) }
	// The engine has taken in a heartbeat of every node before: the
	// steady state a running operator is in.
	takeIn(b, streams[1], update)
	b.ReportAllocs()
	b.SetBytes(int64(len(streams[0])))
	pass := 0
	for b.Loop() {
		takeIn(b, streams[pass%2], update)
		pass++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/held, "ns/event")
}

// benchNode is node i of a kwok cluster at its beat-th heartbeat.
func benchNode(i, beat int) *corev1.Node {
	name := fmt.Sprintf("kwok-node-%d", i)
	at := metav1.NewTime(time.Unix(1_700_000_000+int64(beat)*60, 0))
	since := metav1.NewTime(time.Unix(1_700_000_000, 0))
	conditions := []corev1.NodeCondition{}
	for _, c := range []corev1.NodeConditionType{corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeNetworkUnavailable} {
		status, reason := corev1.ConditionFalse, "KubeletHasSufficient"+string(c)
		if c == corev1.NodeReady {
			status, reason = corev1.ConditionTrue, "KubeletReady"
		}
		conditions = append(conditions, corev1.NodeCondition{Type: c, Status: status, Reason: reason, Message: reason, LastHeartbeatTime: at, LastTransitionTime: since})
	}
	resources := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: types.UID("uid-" + name), ResourceVersion: fmt.Sprint(1000 + i + beat*benchNodes),
			Labels: map[string]string{
				corev1.LabelHostname: name, corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux",
				corev1.LabelTopologyZone: fmt.Sprintf("zone-%d", i%3), "type": "kwok", "pool": "default",
			},
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"},
		},
		Status: corev1.NodeStatus{
			Capacity: resources, Allocatable: resources, Conditions: conditions,
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.0.%d.%d", i/250, i%250)}},
			NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: "fake", Architecture: "amd64", OperatingSystem: "linux"},
		},
	}
}

// benchNodes is the number of nodes the benchmark's engine holds.
const benchNodes = 1000

// heartbeatStream is the watch stream of a heartbeat of each of n nodes,
// as the API server sends it in protobuf.
func heartbeatStream(b *testing.B, n, beat int) []byte {
	info, ok := k8sruntime.SerializerInfoForMediaType(clientgoscheme.Codecs.SupportedMediaTypes(), k8sruntime.ContentTypeProtobuf)
	if !ok {
		b.Fatal("no protobuf serializer")
	}
	encoder := clientgoscheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
	var out bytes.Buffer
	frames := info.StreamSerializer.NewFrameWriter(&out)
	for i := range n {
		var raw bytes.Buffer
		if err := encoder.Encode(benchNode(i, beat), &raw); err != nil {
			b.Fatal(err)
		}
		ev := &metav1.WatchEvent{Type: string(watch.Modified), Object: k8sruntime.RawExtension{Raw: raw.Bytes()}}
		if err := info.StreamSerializer.Encode(ev, frames); err != nil {
			b.Fatal(err)
		}
	}
	return out.Bytes()
}
