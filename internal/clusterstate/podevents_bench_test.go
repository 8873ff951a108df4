package clusterstate

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	restclientwatch "k8s.io/client-go/rest/watch"

	"github.com/placement-guard/placement-guard/internal/pacing"
	"github.com/placement-guard/placement-guard/internal/podwire"
)

// BenchmarkPodEvents takes pod watch events into an engine holding
// 30,000 pods the way the pod feed does: protobuf frames read through the
// feed's framer, decoded by podwire, handed to the store as the reflector
// hands them. The events are a recreation's (a pod deleted, its
// replacement added, bound, then Running and ready); ns/event is the
// manager's cost of a pod event without the connection's (TLS, HTTP).
func BenchmarkPodEvents(b *testing.B) {
	const held, recreated = 30000, 2000
	state := NewClusterState()
	store := newPodFeed(nil, state, nil).store.(*podStore)
	var list []any
	for i := range held {
		list = append(list, benchPod(i))
	}
	if err := store.Replace(list, "1"); err != nil {
		b.Fatal(err)
	}
	state.NotifyPods(func(string, map[string]string, map[string]string) {})
	// Each pass recreates the pods the pass before recreated.
	streams := [2][]byte{}
	var events int
	streams[0], events = recreationStream(b, recreated, heldIncarnation, againIncarnation)
	streams[1], _ = recreationStream(b, recreated, againIncarnation, heldIncarnation)
	b.ReportAllocs()
	b.SetBytes(int64(len(streams[0])))
	pass := 0
	for b.Loop() {
		takeIn(b, streams[pass%2], func(ev watch.Event) error {
			switch ev.Type {
			case watch.Added:
				return store.Add(ev.Object)
			case watch.Modified:
				return store.Update(ev.Object)
			case watch.Deleted:
				return store.Delete(ev.Object)
			}
			return nil
		})
		pass++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(events), "ns/event")
}

// heldIncarnation is the pod i of the engine's 30,000; againIncarnation
// the one its recreation makes.
func heldIncarnation(i int) *corev1.Pod { return benchPod(i) }

func againIncarnation(i int) *corev1.Pod {
	p := benchPod(i)
	p.Name += "-again"
	p.UID = types.UID(fmt.Sprintf("uid-again-%d", i))
	return p
}

// recreationStream is the watch stream of n recreations, each pod from
// replaced by the one to makes, as the API server sends it in protobuf,
// and its number of events.
func recreationStream(b *testing.B, n int, from, to func(int) *corev1.Pod) ([]byte, int) {
	info, ok := k8sruntime.SerializerInfoForMediaType(clientgoscheme.Codecs.SupportedMediaTypes(), k8sruntime.ContentTypeProtobuf)
	if !ok {
		b.Fatal("no protobuf serializer")
	}
	podEncoder := clientgoscheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
	var out bytes.Buffer
	frames := info.StreamSerializer.NewFrameWriter(&out)
	events := 0
	send := func(t watch.EventType, pod *corev1.Pod) {
		var raw bytes.Buffer
		if err := podEncoder.Encode(pod, &raw); err != nil {
			b.Fatal(err)
		}
		ev := &metav1.WatchEvent{Type: string(t), Object: k8sruntime.RawExtension{Raw: raw.Bytes()}}
		if err := info.StreamSerializer.Encode(ev, frames); err != nil {
			b.Fatal(err)
		}
		events++
	}
	for i := range n {
		send(watch.Deleted, from(i*7))
		running := to(i * 7)
		pending := running.DeepCopy()
		pending.Spec.NodeName = ""
		pending.Status = corev1.PodStatus{Phase: corev1.PodPending}
		send(watch.Added, pending)
		bound := pending.DeepCopy()
		bound.Spec.NodeName = running.Spec.NodeName
		bound.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
		send(watch.Modified, bound)
		send(watch.Modified, running)
	}
	return out.Bytes(), events
}

// takeIn hands every event of stream, read as the feeds read a watch, to
// store.
func takeIn(b *testing.B, stream []byte, store func(watch.Event) error) {
	for ev := range podWatch(b, stream).ResultChan() {
		if err := store(ev); err != nil {
			b.Fatal(err)
		}
	}
}

// podWatch reads stream as the pod feed's client reads a watch.
func podWatch(b *testing.B, stream []byte) watch.Interface {
	codecs := pacing.Streams{NegotiatedSerializer: podwire.Serializer{NegotiatedSerializer: clientgoscheme.Codecs.WithoutConversion()}}
	negotiator := k8sruntime.NewClientNegotiator(codecs, corev1.SchemeGroupVersion)
	objects, streams, framer, err := negotiator.StreamDecoder(k8sruntime.ContentTypeProtobuf, nil)
	if err != nil {
		b.Fatal(err)
	}
	frames := framer.NewFrameReader(io.NopCloser(bytes.NewReader(stream)))
	return watch.NewStreamWatcher(restclientwatch.NewDecoder(streaming.NewDecoder(frames, streams), objects), nil)
}
